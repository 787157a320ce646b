"""The quickstart's SFT and served routers on every evaluation set, over several seeds.

    python bench/router_quickstart_seeds.py RUNS [--seeds 0 1 2] [--json F] [--sets NAME ...]

RUNS/qsN is `studio-align quickstart --out RUNS/qsN --set seed=N` (router stages are
enough: `--set grading=false --set flow=false`). Each checkpoint is scored with its own
calibration, as served: `stages/sft/model` (SFT) and `router` (the final, served router).
Sets: the generator's held-out split of that run, the packaged evaluation sets (or the
packaged sets named by `--sets`, validation sets among them), and each one's *agreed*
rows (label == the simulated creators' majority plan; measurement only).
Prints one row per (router, set): mean ± standard deviation over the seeds of exact-plan
accuracy (all, English, Chinese), step F1 by language, ECE, coverage at 95 % selective
accuracy and the abstain rate.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from studio_align.router import eval as packaged
from studio_align.router.data import read_examples
from studio_align.router.evaluate import evaluate_router_sets
from studio_align.router.router import Router
from studio_align.simulate.router.creators import majority_plans

ROUTERS = {"sft": "stages/sft/model", "final": "router"}
COLUMNS = ("exact", "en", "zh", "f1_en", "f1_zh", "ece", "cov95", "abstain")


def figures(f: dict[str, Any]) -> dict[str, float]:
    lang = f["by_language"]
    sel = f.get("selective", {})
    return {
        "exact": f["exact_plan_accuracy"],
        "en": lang.get("en", {}).get("exact_plan_accuracy", float("nan")),
        "zh": lang.get("zh", {}).get("exact_plan_accuracy", float("nan")),
        "f1_en": lang.get("en", {}).get("step_f1", float("nan")),
        "f1_zh": lang.get("zh", {}).get("step_f1", float("nan")),
        "ece": f.get("ece", float("nan")),
        "cov95": sel.get("coverage_at_target", float("nan")),
        "abstain": f.get("abstain_rate", 0.0),
    }


def score_run(
    qs: Path, names: Sequence[str] = packaged.EVAL_SETS
) -> dict[str, dict[str, dict[str, float]]]:
    sets = {"heldout": read_examples(qs / "data/heldout.jsonl")}
    sets.update({n: packaged.load(n) for n in names})
    for name in list(sets):
        maj = majority_plans(sets[name])
        sets[name + "_agreed"] = [
            r for r, m in zip(sets[name], maj, strict=True) if list(r["plan"]) == list(m["plan"])
        ]
    out: dict[str, dict[str, dict[str, float]]] = {}
    for who, rel in ROUTERS.items():
        res = evaluate_router_sets(Router.load(qs / rel), sets, batch_size=128)
        out[who] = {name: figures(f) for name, (f, _, _) in res.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--sets", nargs="+", default=list(packaged.EVAL_SETS))
    args = ap.parse_args(argv)
    per_seed = {s: score_run(args.runs / f"qs{s}", args.sets) for s in args.seeds}
    print("| router | set | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 2) + "|")
    first = per_seed[args.seeds[0]]
    for who in first:
        for name in first[who]:
            cells = []
            for col in COLUMNS:
                xs = np.array([per_seed[s][who][name][col] for s in args.seeds], float)
                cells.append(f"{np.nanmean(xs):.3f} ± {np.nanstd(xs):.3f}")
            print(f"| {who} | {name} | " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps(per_seed, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
