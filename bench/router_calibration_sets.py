"""Which packaged validation sets the quickstart's calibration is fitted on, judged on the
validation sets neither choice fits on.

    python bench/router_calibration_sets.py RUNS --seeds 0 1 2 --a handwritten_val \
        --b handwritten_val handwritten_val11 [--json F]

RUNS/qsN is `studio-align quickstart --out RUNS/qsN --set seed=N` (router stages are
enough). For each seed, the SFT router (`stages/sft/model`) and the served router
(`router`, calibrated on the rows it plans as SFT does) are copied and recalibrated by
`router.stage_run.calibrate_stage` itself, once with `calibration.sets` = A and once with
B (plus the generator's first 80 validation requests either way; plans never change).
Each copy is scored on every packaged validation set in neither A nor B. Printed per
(router, choice, set), means over the seeds: exact, abstain rate, ECE and the share of
requests routed (not abstained) with a wrong plan. Evaluation sets are never read.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from studio_align.quickstart.config import QuickstartConfig
from studio_align.router import eval as packaged
from studio_align.router.data import read_examples
from studio_align.router.evaluate import evaluate_router
from studio_align.router.router import Router
from studio_align.router.settings import StageData
from studio_align.router.stage_run import calibrate_stage

ROUTERS = {"sft": "stages/sft/model", "served": "router"}


def score(ckpt: Path, rows: list[dict[str, Any]]) -> dict[str, float]:
    f, _, _ = evaluate_router(Router.load(ckpt), rows, batch_size=128)
    routed = 1.0 - f["abstain_rate"]
    wrong = routed * (1.0 - f["accuracy_when_routed"]) if routed > 0 else 0.0
    return {"exact": f["exact_plan_accuracy"], "abstain": f["abstain_rate"], "ece": f["ece"],
            "routed_wrong": wrong}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--a", nargs="+", required=True, help="calibration.sets of choice A")
    ap.add_argument("--b", nargs="+", required=True, help="calibration.sets of choice B")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    scored = [n for n in packaged.VAL_SETS if n not in {*args.a, *args.b}]
    sets = {n: packaged.load(n) for n in scored}
    out: dict[str, Any] = {}
    for seed in args.seeds:
        run = args.runs / f"qs{seed}"
        data = StageData(train=read_examples(run / "data" / "train.jsonl"),
                         val=read_examples(run / "data" / "val.jsonl"))  # fmt: skip
        for choice, names in (("a", args.a), ("b", args.b)):
            cfg = QuickstartConfig.model_validate({"calibration": {"sets": names}})
            with tempfile.TemporaryDirectory() as tmp:
                copies = {}
                for name, sub in ROUTERS.items():
                    copies[name] = Path(tmp) / name
                    shutil.copytree(run / sub, copies[name])
                calibrate_stage(copies["sft"], cfg, data)
                calibrate_stage(copies["served"], cfg, data, copies["sft"])
                for name, ck in copies.items():
                    for set_name, rows in sets.items():
                        out.setdefault(name, {}).setdefault(choice, {}).setdefault(
                            set_name, []).append(score(ck, rows))  # fmt: skip
            print(f"seed {seed} choice {choice} done", file=sys.stderr, flush=True)
    keys = ("exact", "abstain", "ece", "routed_wrong")
    print("router  choice set                 " + "  ".join(f"{k:>12}" for k in keys))
    for name, by_choice in out.items():
        for choice, by_set in by_choice.items():
            for set_name, runs in by_set.items():
                means = [np.mean([r[k] for r in runs]) for k in keys]
                print(f"{name:7} {choice:6} {set_name:20}" + "  ".join(f"{m:12.3f}" for m in means))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
