"""Forgetting after preference tuning (issue 14): label accuracy where creators agree.

    python bench/router_forgetting.py SFT_CKPT --out DIR [--stages dpo,grpo,kto]
        [--set sft.steps=800 ...] [--trial dpo.optim.learning_rate=3e-5,dpo.nll_alpha=4 --trial ...] [--eval]

Runs the quickstart's preference stages with the given overrides from an existing SFT
checkpoint (`dpo` and `kto` start from SFT, as `preference=dpo` / `preference=kto` do;
`grpo` starts from DPO when `dpo` ran, else from SFT, as in the quickstart), then scores
SFT and every tuned router on the *agreed* subsets (label == the majority creator's plan)
of the validation sets: the generator's validation split, the hand-written validation
sets (`handwritten_val`, `handwritten_val2` and the two pooled, `val_hw_all_agreed`: the
only validation figure made of hand-written phrasing alone), and the held-out-clause
split (`demo.heldout_clause_examples`: phrasings neither training nor any evaluation set
uses; the generator's validation split shares training's phrasings, so SFT scores ~1.0
there and it cannot show forgetting), and the clause split pooled with `handwritten_val`
(`val_pooled_agreed`, the figure round 4 chose the mixing weight on). Forgetting = SFT
accuracy minus tuned accuracy there, in points; agreement with the creators' finals on
the compiled logs' held-out routes is shown beside it, so a setting that forgets nothing
by learning nothing is visible. Settings are chosen on these figures.

`--eval` also scores the evaluation sets' agreed subsets (the generator's held-out set,
hand-written v1 and v2) and the unseen creators' preferred plans: for reporting the chosen
setting once, never for choosing. Every router is scored uncalibrated (greedy plans do not
depend on the temperature). `--trial seed=S` varies the stages' seed (batch order, GRPO
sampling) on the same data and SFT checkpoint.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from studio_align.config import apply_overrides, validate
from studio_align.models.interpolate import interpolate_bundles
from studio_align.plugins import get_host
from studio_align.quickstart.config import QuickstartConfig, StageData
from studio_align.router import eval as packaged
from studio_align.router.data import read_examples
from studio_align.router.evaluate import evaluate_router
from studio_align.router.router import Router
from studio_align.router.stages import STAGES
from studio_align.simulate.router.creators import majority_plans
from studio_align.simulate.router.platform import simulate_platform
from studio_align.simulate.router.requests import heldout_clause_examples

CLAUSE_SEED = 9001  # the held-out-clause validation split's seed (any seed: no eval overlap)


def agreed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    maj = majority_plans(rows)
    return [r for r, m in zip(rows, maj, strict=True) if r["plan"] == m["plan"]]


def existing_data(d: Path, catalog: Any) -> StageData:
    """A finished quickstart run's data (its own validation split, logs and held-out set, and
    its SFT training split, which `dpo.replay_alpha` replays)."""
    train = read_examples(d / "train.jsonl") if (d / "train.jsonl").is_file() else []
    return StageData(
        train=train,
        val=read_examples(d / "val.jsonl"),
        compiled=d / "compiled",
        eval_sets={
            "heldout": read_examples(d / "heldout.jsonl"),
            "handwritten": packaged.load("handwritten_v1"),
            "handwritten_v2": packaged.load("handwritten_v2"),
            "creators": read_examples(d / "creators_eval.jsonl"),
        },
    )


def generated_data(out: Path, catalog: Any, cfg: QuickstartConfig) -> StageData:
    """The quickstart's simulated platform for `cfg`, generated into OUT."""
    platform = simulate_platform(
        out, catalog, seed=cfg.seed, n_train=cfg.n_train or cfg.sft.steps * cfg.sft.batch_size,
        n_val=cfg.n_val, n_heldout=cfg.n_heldout, n_creators=cfg.n_creators,
        n_eval_creators=cfg.n_eval_creators,
    )  # fmt: skip
    splits = platform["splits"]
    return StageData(train=splits["train"], val=splits["val"], compiled=platform["compiled"],
                     eval_sets=platform["eval_sets"])  # fmt: skip


def score(
    ckpts: dict[str, Path], sets: dict[str, list[dict[str, Any]]], sft: dict[str, float]
) -> dict[str, Any]:
    res: dict[str, dict[str, float]] = {}
    for name, path in ckpts.items():
        router = Router.load(path)
        router.calibration, router.memory = None, None
        res[name] = {
            k: evaluate_router(router, v, batch_size=128)[0]["exact_plan_accuracy"]
            for k, v in sets.items()
        }
    forgetting = {
        stage: {k: round(100 * (sft[k] - res[stage][k]), 1) for k in sets if k.endswith("_agreed")}
        for stage in ckpts
        if sft
    }
    return {"accuracy": res, "forgetting_points": forgetting}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("sft", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--stages", default="dpo,grpo")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument(
        "--trial", action="append", default=[],
        help="k=v,k=v: one setting on top of --set (repeatable; one process, one data set)",
    )  # fmt: skip
    ap.add_argument(
        "--mix", default="",
        help="w,w,...: also score each tuned router mixed with SFT (w * tuned + (1-w) * SFT)",
    )  # fmt: skip
    ap.add_argument("--eval", action="store_true", help="also score the evaluation sets")
    ap.add_argument(
        "--tuned", action="append", default=[],
        help="stage=DIR: an already tuned router of a quickstart run (no training)",
    )  # fmt: skip
    ap.add_argument("--data", type=Path, help="that run's OUT/data (else generated anew)")
    ap.add_argument("--clause-n", type=int, default=600, help="held-out-clause requests")
    args = ap.parse_args(argv)
    catalog = get_host().catalog
    base = validate(QuickstartConfig, apply_overrides({}, args.overrides), source="--set")
    data = (
        existing_data(args.data, catalog) if args.data else generated_data(args.out, catalog, base)
    )
    clause = agreed(heldout_clause_examples(args.clause_n, seed=CLAUSE_SEED))
    hw_val = agreed(packaged.load("handwritten_val"))
    hw_val2 = agreed(packaged.load("handwritten_val2"))
    sets = {
        "val_agreed": agreed(list(data.val)),
        "val_hw_agreed": hw_val,
        "val_hw2_agreed": hw_val2,
        "val_hw_all_agreed": hw_val + hw_val2,
        "val_clause_agreed": clause,
        "val_pooled_agreed": clause + hw_val,
        "val_creators_finals": read_examples(data.compiled / "heldout" / "routing_examples.jsonl"),
    }
    if args.eval:
        ev = data.eval_sets
        sets |= {
            "heldout_agreed": agreed(ev["heldout"]),
            "hw_v1_agreed": agreed(ev["handwritten"]),
            "hw_v2_agreed": agreed(ev["handwritten_v2"]),
            "creators_eval": ev["creators"],
        }
    sft = score({"sft": args.sft}, sets, {})["accuracy"]["sft"]
    trials = []
    for i, trial in enumerate(args.trial or [""]):
        extra = [t for t in trial.split(",") if t]
        cfg = validate(
            QuickstartConfig, apply_overrides({}, args.overrides + extra), source="--trial"
        )
        run = args.out / f"trial{i}"
        ckpts: dict[str, Path] = {k: Path(v) for k, v in (t.split("=", 1) for t in args.tuned)}
        for stage in [x for x in args.stages.split(",") if x]:
            start = ckpts.get("dpo", args.sft) if stage == "grpo" else args.sft
            ckpts[stage] = STAGES[stage](run, cfg, data, start, catalog)
        for w in [float(x) for x in args.mix.split(",") if x]:
            for stage in [k for k in ckpts if "@" not in k]:
                ckpts[f"{stage}@{w}"] = interpolate_bundles(
                    args.sft, ckpts[stage], weight=w, out=run / f"mix-{stage}-{w}"
                )
        trials.append({"trial": extra, **score(ckpts, sets, sft)})
        print(json.dumps(trials[-1]), flush=True)
    out = {
        "sft_checkpoint": str(args.sft),
        "overrides": args.overrides,
        "stages": args.stages,
        "sizes": {k: len(v) for k, v in sets.items()},
        "sft": sft,
        "trials": trials,
    }
    print(json.dumps(out, indent=1))
    (args.out / "forgetting.json").write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
