"""Forgetting after preference tuning (issue 14): label accuracy where creators agree.

    python bench/router_forgetting.py SFT_CKPT --out DIR [--set dpo_nll_alpha=4 --set grpo_beta=0.1 ...]

Runs the quickstart's preference stages (DPO then GRPO, with the given overrides) from an
existing SFT checkpoint, then scores SFT and the tuned router on the *agreed* subsets
(label == the majority creator's plan) of the validation sets only: the generator's
validation split and the hand-written validation set. Forgetting = SFT accuracy minus
tuned accuracy there; the creators' agreement on the compiled logs' held-out routes is
shown beside it, so a setting that forgets nothing by learning nothing is visible.
Settings are chosen here; the evaluation sets are scored once, by router_eval.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from studio_align.intents.pipeline import QuickstartConfig, prepare_data, stage_dpo, stage_grpo

from studio_align.config import apply_overrides, validate
from studio_align.intents import eval as packaged
from studio_align.intents.creators import majority_plans
from studio_align.intents.demo import read_examples
from studio_align.intents.evaluate import evaluate_router
from studio_align.intents.router import Router
from studio_align.plugins import get_host


def agreed(rows: list[dict]) -> list[dict]:
    maj = majority_plans(rows)
    return [r for r, m in zip(rows, maj, strict=True) if r["plan"] == m["plan"]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("sft", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args(argv)
    cfg = validate(QuickstartConfig, apply_overrides({}, args.overrides), source="--set")
    data = prepare_data(args.out, cfg, get_host().catalog)
    ckpt = stage_dpo(args.out, cfg, data, args.sft) if cfg.dpo_steps > 0 else args.sft
    if cfg.grpo_steps > 0:
        ckpt = stage_grpo(args.out, cfg, data, ckpt)
    val_gen = list(data["splits"]["val"])
    val_hw = packaged.load("handwritten_val")
    logs_val = read_examples(data["compiled"] / "heldout" / "routing_examples.jsonl")
    sets = {
        "val_agreed": agreed(val_gen),
        "val_hw_agreed": agreed(val_hw),
        "val_creators_finals": logs_val,
    }
    res: dict[str, dict[str, float]] = {}
    for name, path in (("sft", args.sft), ("tuned", ckpt)):
        router = Router.load(path)
        router.calibration = None
        res[name] = {
            k: evaluate_router(router, v, batch_size=128)[0]["exact_plan_accuracy"]
            for k, v in sets.items()
        }
    forget = {k: res["sft"][k] - res["tuned"][k] for k in ("val_agreed", "val_hw_agreed")}
    print(json.dumps({"overrides": args.overrides, "checkpoint": str(ckpt), **res,
                      "forgetting": forget}, indent=1))  # fmt: skip
    (args.out / "forgetting.json").write_text(
        json.dumps({"overrides": args.overrides, "checkpoint": str(ckpt), **res,
                    "forgetting": forget}, indent=1), encoding="utf-8")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
