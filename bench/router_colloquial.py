"""SFT routers trained with and without the colloquial rewriting lever (issue 14), scored on
validation.

    python bench/router_colloquial.py --out DIR --prob 0,0.3 [--langs zh] [--seeds 0,1] [--steps 800]
        [--trial sft.steps=1200 --trial model.num_layers=4 ...] [--eval] [--json F]

For each colloquial probability and seed: the quickstart's data (`demo_splits`, the
quickstart's sizes) with that fraction of training requests rewritten by
`demo_colloquial`, then the quickstart's SFT stage (`stages.stage_sft`, its settings) and
its calibration (fitted on `handwritten_val` + 80 generator validation examples, as
`quickstart/report.py` does). Scored on validation only: `handwritten_val2` (96, never
used by calibration, so its ECE and coverage are out of sample), `handwritten_val` (80,
in-sample for calibration), the two pooled (`hw_val_all`, the figure a setting is chosen
on), the held-out-clause split (300) and the generator's validation split (200).

`--trial k=v,k=v` (repeatable) trains one router per trial with those quickstart overrides
on top of the defaults (`model.*` keys merge into the default model; `sft.steps` also sizes
the training split, as in the quickstart); no `--trial`: the defaults.

`--unfam-conf` fits the calibration with the unfamiliarity in the confidence
(`fit_calibration(unfamiliarity_in_confidence=True)`).

`--reuse` scores the routers already trained in OUT instead of training them again.
`--eval` also scores the evaluation sets (the generator's held-out 400, hand-written v1
and v2): for reporting the chosen setting once, never for choosing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from studio_align.config import apply_overrides, validate
from studio_align.plugins import get_host
from studio_align.quickstart.config import QuickstartConfig, StageData
from studio_align.router import eval as packaged
from studio_align.router.calibration import fit_calibration
from studio_align.router.evaluate import evaluate_router_sets
from studio_align.router.router import Router
from studio_align.router.stages import stage_sft
from studio_align.simulate.router.requests import LANGS, demo_splits, heldout_clause_examples

CLAUSE_SEED = 9001  # as bench/router_forgetting.py


def val_sets(splits: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    v1, v2 = packaged.load("handwritten_val"), packaged.load("handwritten_val2")
    return {
        "hw_val2": v2,
        "hw_val": v1,
        "hw_val_all": v1 + v2,
        "clause": heldout_clause_examples(300, seed=CLAUSE_SEED),
        "gen_val": splits["val"],
    }


def eval_sets(splits: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    return {
        "heldout": splits["heldout"],
        "hw_v1": packaged.load("handwritten_v1"),
        "hw_v2": packaged.load("handwritten_v2"),
    }


def row(name: str, f: dict[str, Any]) -> dict[str, Any]:
    lang = f.get("by_language", {})
    return {
        "set": name,
        "n": f["n"],
        "exact": f["exact_plan_accuracy"],
        "en": lang.get("en", {}).get("exact_plan_accuracy", float("nan")),
        "zh": lang.get("zh", {}).get("exact_plan_accuracy", float("nan")),
        "f1": f["step_f1"],
        "ece_raw": f.get("ece_uncalibrated", f.get("ece")),
        "ece": f.get("ece"),
        "cov95": f.get("selective", {}).get("coverage_at_target"),
    }


def run_one(
    out: Path,
    prob: float,
    seed: int,
    steps: int,
    with_eval: bool,
    reuse: bool = False,
    langs: tuple[str, ...] = LANGS,
    trial: str = "",
    wide: float = 0.0,
    unfam_conf: bool = False,
) -> dict[str, Any]:
    extra = [f"seed={seed}", f"sft.steps={steps}", *(t for t in trial.split(",") if t)]
    base = QuickstartConfig().model_dump()
    cfg = validate(QuickstartConfig, apply_overrides(base, extra), source="--trial")
    splits = demo_splits(
        seed=seed,
        n_train=cfg.sft.steps * cfg.sft.batch_size,
        n_val=cfg.n_val,
        n_heldout=cfg.n_heldout,
        colloquial_prob=prob,
        colloquial_langs=langs,
        wide_prob=wide,
    )
    tag = "" if langs == LANGS else "_" + "+".join(langs)
    tag += "_" + trial.replace(",", "+").replace("=", "") if trial else ""
    tag += f"_w{wide:g}" if wide else ""
    run = out / f"p{prob:g}{tag}_s{seed}"
    t0 = time.perf_counter()
    ckpt = run / "stages" / "sft" / "model"
    if not (reuse and (ckpt / "router.json").exists()):
        data = StageData(train=splits["train"], val=splits["val"])
        ckpt = stage_sft(run, cfg, data, None, get_host().catalog)
    seconds = time.perf_counter() - t0
    router = Router.load(ckpt)
    router.calibration = None
    cal_val = packaged.load("handwritten_val") + list(splits["val"][:80])
    fit_calibration(
        router,
        splits["train"],
        cal_val,
        target=cfg.calibration.abstain_target,
        unfamiliarity_in_confidence=unfam_conf,
    )
    sets = val_sets(splits) | (eval_sets(splits) if with_eval else {})
    scored = evaluate_router_sets(router, sets, batch_size=cfg.eval_batch_size)
    rows = [row(name, scored[name][0]) for name in sets]
    return {
        "prob": prob,
        "langs": list(langs),
        "seed": seed,
        "steps": cfg.sft.steps,
        "trial": trial,
        "wide": wide,
        "unfam_conf": unfam_conf,
        "sft_seconds": seconds,
        "rows": rows,
    }


def show(res: dict[str, Any]) -> None:
    print(
        f"\ncolloquial_prob={res['prob']} wide={res['wide']} langs={res['langs']} seed={res['seed']} "
        f"steps={res['steps']} trial={res['trial']!r} "
        f"SFT {res['sft_seconds']:.0f}s"
    )
    keys = ["set", "n", "exact", "en", "zh", "f1", "ece_raw", "ece", "cov95"]
    print(" ".join(f"{k:>10}" for k in keys))
    for r in res["rows"]:
        cells = [f"{r[k]:>10.3f}" if isinstance(r[k], float) else f"{r[k]!s:>10}" for k in keys]
        print(" ".join(cells), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--prob", default="0,0.3", help="colloquial probabilities, comma-separated")
    ap.add_argument("--langs", default="en,zh", help="languages the lever rewrites")
    ap.add_argument("--wide", default="0", help="wider-lexicon fractions, comma-separated")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--steps", type=int, default=QuickstartConfig().sft.steps)
    ap.add_argument("--trial", action="append", default=[], help="k=v,k=v overrides")
    ap.add_argument("--eval", action="store_true", help="also score v1, v2 and held-out")
    ap.add_argument("--reuse", action="store_true", help="score a router already trained in OUT")
    ap.add_argument(
        "--unfam-conf", action="store_true", help="fit the unfamiliarity-aware confidence"
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    results = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for prob in (float(p) for p in args.prob.split(",")):
            for trial in args.trial or [""]:
                for wide in (float(w) for w in args.wide.split(",")):
                    langs = tuple(args.langs.split(","))
                    res = run_one(
                        args.out,
                        prob,
                        seed,
                        args.steps,
                        args.eval,
                        args.reuse,
                        langs,
                        trial,
                        wide,
                        unfam_conf=args.unfam_conf,
                    )
                    show(res)
                    results.append(res)
                    if args.json:
                        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
