"""SFT of the router on the pretrained encoder against the from-scratch router, on
validation only (the generator's validation split, handwritten_val, handwritten_val2).

    nice python bench/router_encoder.py OUT [--steps 300] [--seed 0] [--scratch] [--train-encoder] [--refusal P] [--wide P]

Trains one SFT router through the quickstart's own stage (`router.stages.stage_sft`,
the quickstart's data and settings, with `[model] options.encoder` set unless
`--scratch`) and prints its exact-plan accuracy, by language, on each validation set,
with the seconds SFT took. Settings are compared here, never on the evaluation sets.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from studio_align.catalog import default_catalog
from studio_align.quickstart.config import QuickstartConfig
from studio_align.router import eval as packaged
from studio_align.router.evaluate import evaluate_router
from studio_align.router.router import Router
from studio_align.router.stages import stage_sft
from studio_align.simulate.router.requests import demo_splits


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--scratch", action="store_true", help="the from-scratch router")
    ap.add_argument("--train-encoder", action="store_true")
    ap.add_argument("--refusal", type=float, default=None, help="the generator's refusal_prob")
    ap.add_argument("--wide", type=float, default=None, help="the generator's wide_prob")
    args = ap.parse_args(argv)
    q = QuickstartConfig(seed=args.seed, sft_steps=args.steps)
    if args.lr is not None:
        q = q.model_copy(update={"sft_lr": args.lr})
    n_train = q.n_train or q.sft_steps * q.batch_size
    splits = demo_splits(seed=q.seed, n_train=n_train, n_val=q.n_val, n_heldout=q.n_heldout,
                         refusal_prob=args.refusal, wide_prob=args.wide)  # fmt: skip
    q = q.model_copy(update={"encoder": "none" if args.scratch else "use-multilingual-v3",
                             "train_encoder": args.train_encoder})  # fmt: skip
    data = {"splits": splits}
    catalog = default_catalog()
    t0 = time.perf_counter()
    ckpt = stage_sft(args.out, q, data, None, catalog)
    seconds = time.perf_counter() - t0
    router = Router.load(ckpt)
    sets = {"val": splits["val"], **{n: packaged.load(n) for n in packaged.VAL_SETS}}
    out = {"steps": args.steps, "seed": args.seed, "encoder": q.encoder,
           "train_encoder": q.train_encoder, "refusal": args.refusal, "wide": args.wide, "sft_seconds": seconds}  # fmt: skip
    for name, rows in sets.items():
        f, _, _ = evaluate_router(router, rows, batch_size=128)
        lang = f["by_language"]
        out[name] = {
            "exact": f["exact_plan_accuracy"],
            "en": lang.get("en", {}).get("exact_plan_accuracy"),
            "zh": lang.get("zh", {}).get("exact_plan_accuracy"),
            "ece": f.get("ece"),
        }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
