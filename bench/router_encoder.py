"""SFT of the router on the pretrained encoder against the from-scratch router, on
validation only (the generator's validation split and the packaged validation sets,
`eval.VAL_SETS`).

    nice python bench/router_encoder.py OUT [--steps 300] [--seed 0] [--scratch] [--no-train-encoder] [--encoder-lora RANK [--lora-table]] [--encoder-lr-scale F] [--refusal P] [--wide P] [--colloquial P] [--correction P] [--prompt P] [--busy P] [--anime P] [--context P] [--spoken P] [--foreign P] [--dialect P] [--fix P] [--text P] [--lettering P] [--film P] [--palette P] [--long P] [--decline P] [--destination P] [--twin P [--twin-kinds KIND ...]] [--repeat INTENT=K ...] [--ema D] [--batch N] [--reuse] [--styles STYLE ...]

Trains one SFT router through the quickstart's own stage (`router.stages.stage_sft`,
the quickstart's data and settings, with `[model] options.encoder` set unless
`--scratch`; the encoder fine-tuned as the quickstart's default does unless
`--no-train-encoder`, or through low-rank adapters of rank RANK with `--encoder-lora`,
on the piece table too with `--lora-table`; `--encoder-lr-scale` multiplies its learning rate) and prints its exact-plan accuracy, by language, on each validation
set and pooled over the packaged ones, with the seconds SFT took. Settings are compared
here, never on the evaluation sets. `--reuse` scores the checkpoint an earlier run left in
OUT instead of training again (for a validation set added since). `--styles` adds two
scored sets: the validation rows tagged with those styles (`styled`) and the rest (`rest`).
The pooled validation rows are also scored split by plan length: `multi_step` (two or
more steps) and `one_step`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from studio_align.catalog import default_catalog
from studio_align.models.conditioned import CONDITIONINGS
from studio_align.quickstart.config import QuickstartConfig, StageData
from studio_align.router import eval as packaged
from studio_align.router.evaluate import evaluate_router
from studio_align.router.router import Router
from studio_align.router.stages import stage_sft
from studio_align.simulate.router.requests import demo_splits

# the generator's levers, each `--NAME P` passed to `demo_splits` as `NAME_prob`
LEVERS = ("refusal", "wide", "colloquial", "correction", "prompt", "busy", "anime", "anime_subject",
          "context", "spoken", "foreign", "dialect", "fix", "text", "lettering", "film", "palette", "long", "decline",
          "destination", "twin")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--scratch", action="store_true", help="the from-scratch router")
    ap.add_argument("--train-encoder", action=argparse.BooleanOptionalAction, default=None,
                    help="fine-tune the encoder in SFT (default: the quickstart's)")  # fmt: skip
    ap.add_argument("--encoder-lora", type=int, default=None, metavar="RANK",
                    help="fine-tune the encoder through adapters of this rank")  # fmt: skip
    ap.add_argument("--lora-table", action="store_true", help="adapters on the piece table too")
    for lever in LEVERS:
        ap.add_argument(f"--{lever}", type=float, default=None,
                        help=f"the generator's {lever}_prob")  # fmt: skip
    ap.add_argument("--twin-kinds", nargs="+", default=None, metavar="KIND",
                    help="the destination kinds that get twins (default: levers.TWIN_KINDS)")  # fmt: skip
    ap.add_argument("--repeat", nargs="+", default=None, metavar="INTENT=K",
                    help="the generator's intent_repeats: INTENT K times a cycle (default: levers.INTENT_REPEATS)")  # fmt: skip
    ap.add_argument("--encoder-lr-scale", type=float, default=None,
                    help="the encoder's learning rate as a fraction of SFT's")  # fmt: skip
    ap.add_argument("--ema", type=float, default=None, help="SFT's [optim] ema_decay")
    ap.add_argument("--batch", type=int, default=None, help="examples per SFT step")
    ap.add_argument(
        "--conditioning",
        default=None,
        choices=CONDITIONINGS,
        help="what the decoder reads of the encoder (`models.conditioned`)",
    )
    ap.add_argument("--reuse", action="store_true", help="score OUT's checkpoint, no training")
    ap.add_argument(
        "--styles",
        nargs="+",
        default=[],
        metavar="STYLE",
        help="also score the validation rows of these styles together (`styled`) "
        "and every other validation row (`rest`)",
    )
    args = ap.parse_args(argv)
    sft: dict[str, Any] = {"steps": args.steps}
    optim: dict[str, Any] = {}
    if args.lr is not None:
        optim["learning_rate"] = args.lr
    if args.encoder_lr_scale is not None:
        optim["lr_scale"] = {"encoder": args.encoder_lr_scale}
    if args.ema is not None:
        optim["ema_decay"] = args.ema
    if optim:
        sft["optim"] = optim
    settings: dict[str, Any] = {"seed": args.seed, "sft": sft,
                                "encoder": "none" if args.scratch else "use-multilingual-v3"}  # fmt: skip
    if args.batch is not None:
        sft["batch_size"] = args.batch
    if args.train_encoder is not None:
        settings["train_encoder"] = args.train_encoder
    if args.conditioning is not None:
        settings["conditioning"] = args.conditioning
    if args.encoder_lora is not None:
        settings["encoder_lora"] = {"rank": args.encoder_lora, "table": args.lora_table}
    q = QuickstartConfig.model_validate(settings)
    n_train = q.n_train or q.sft.steps * q.sft.batch_size
    levers = {lever: getattr(args, lever) for lever in LEVERS}
    kinds = {} if args.twin_kinds is None else {"twin_kinds": tuple(args.twin_kinds)}
    repeats = None
    if args.repeat is not None:
        pairs = [r.partition("=") for r in args.repeat]
        if any(not k or not v.isdigit() for k, _, v in pairs):
            ap.error(f"--repeat takes INTENT=K with K a whole number, got {args.repeat}")
        repeats = {k: int(v) for k, _, v in pairs}
    splits = demo_splits(seed=q.seed, n_train=n_train, n_val=q.n_val, n_heldout=q.n_heldout,
                         intent_repeats=repeats,
                         **{f"{lever}_prob": p for lever, p in levers.items()}, **kinds)  # fmt: skip
    data = StageData(train=splits["train"], val=splits["val"])
    catalog = default_catalog()
    t0 = time.perf_counter()
    saved = sorted(args.out.glob("**/router.json"))
    reuse = args.reuse and saved
    ckpt = saved[0].parent if reuse else stage_sft(args.out, q, data, None, catalog)
    seconds = time.perf_counter() - t0
    router = Router.load(ckpt)
    sets = {"val": splits["val"], **{n: packaged.load(n) for n in packaged.VAL_SETS}}
    out = {"steps": args.steps, "seed": args.seed, "encoder": q.encoder,
           "train_encoder": q.train_encoder, "encoder_lr_scale": args.encoder_lr_scale,
           "encoder_lora": q.encoder_lora and q.encoder_lora.model_dump(),
           **levers, "twin_kinds": args.twin_kinds, "intent_repeats": repeats,
           "ema": args.ema, "batch": args.batch, "conditioning": q.conditioning,
           "sft_seconds": seconds}  # fmt: skip
    pooled = [r for n in packaged.VAL_SETS for r in sets[n]]
    scored: dict[str, list[dict[str, Any]]] = {**sets, "pooled": pooled}
    # a lever that teaches "this medium is named, not asked" can teach dropping asked steps
    scored["multi_step"] = [r for r in pooled if len(r["plan"]) >= 2]
    scored["one_step"] = [r for r in pooled if len(r["plan"]) < 2]
    if args.styles:
        scored["styled"] = [r for r in pooled if r.get("style") in args.styles]
        scored["rest"] = [r for r in pooled if r.get("style") not in args.styles]
    for name, rows in scored.items():
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
