"""Router figures for issue 14: accuracy by language, calibration, selective accuracy.

    python bench/router_eval.py OUT/stages/sft/final OUT/router --data OUT/data [--save] [--json F]

For each checkpoint: fit the calibration (temperature, unfamiliarity model, abstain
thresholds) on validation only (the hand-written validation set plus 80 generator
validation examples; the unfamiliarity model on 2000 training examples), then score the
generator's held-out set, the old 50 hand-written requests and the new 228, each
against its labels and on the *agreed* subset (label == the majority creator's plan).
`--save` writes the calibration into the checkpoint (what quickstart does); `--unfam-conf`
fits the unfamiliarity-aware confidence (`fit_calibration(unfamiliarity_in_confidence=)`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from studio_align.router import eval as packaged
from studio_align.router.calibration import fit_calibration
from studio_align.router.data import read_examples
from studio_align.router.evaluate import evaluate_router
from studio_align.router.router import Router
from studio_align.simulate.router.creators import majority_plans
from studio_align.simulate.router.requests import generate_examples


def eval_sets(n_heldout: int = 400, seed: int = 0) -> dict[str, list[dict[str, Any]]]:
    sets = {
        "heldout": generate_examples(n_heldout, seed=seed + 1, split="heldout"),
        "hw_v1": packaged.load("handwritten_v1"),
        "hw_v2": packaged.load("handwritten_v2"),
    }
    for name in list(sets):
        maj = majority_plans(sets[name])
        sets[f"{name}_agreed"] = [
            r for r, m in zip(sets[name], maj, strict=True) if r["plan"] == m["plan"]
        ]
    return sets


def validation(data: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    train = read_examples(data / "train.jsonl")
    val = packaged.load("handwritten_val") + read_examples(data / "val.jsonl")[:80]
    return train, val


def row(name: str, f: dict[str, Any]) -> dict[str, Any]:
    lang = f.get("by_language", {})
    sel = f.get("selective", {})
    return {
        "set": name,
        "n": f["n"],
        "exact": f["exact_plan_accuracy"],
        "f1": f["step_f1"],
        "en": lang.get("en", {}).get("exact_plan_accuracy", float("nan")),
        "zh": lang.get("zh", {}).get("exact_plan_accuracy", float("nan")),
        "f1_en": lang.get("en", {}).get("step_f1", float("nan")),
        "f1_zh": lang.get("zh", {}).get("step_f1", float("nan")),
        "ece_raw": f.get("ece_uncalibrated", f.get("ece")),
        "ece_cal": f.get("ece"),
        "cov95": sel.get("coverage_at_target"),
        "abstain": f.get("abstain_rate"),
        "acc_routed": f.get("accuracy_when_routed"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoints", nargs="+", type=Path)
    ap.add_argument("--data", type=Path, required=True, help="quickstart OUT/data")
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("--save", action="store_true")
    ap.add_argument("--unfam-conf", action="store_true", help="the unfamiliarity-aware confidence")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    sets = eval_sets()
    train, val = validation(args.data)
    out: dict[str, Any] = {}
    for ckpt in args.checkpoints:
        router = Router.load(ckpt)
        router.calibration = None
        raw = {k: evaluate_router(router, v, batch_size=128)[0] for k, v in sets.items()}
        cal = fit_calibration(
            router, train, val, target=args.target, unfamiliarity_in_confidence=args.unfam_conf
        )
        if args.save:
            cal.save(ckpt)
        figs = {k: evaluate_router(router, v, batch_size=128)[0] for k, v in sets.items()}
        rows = []
        for k in sets:
            r = row(k, figs[k])
            r["cov95_raw"] = raw[k]["selective"]["coverage_at_target"]
            rows.append(r)
        out[str(ckpt)] = {
            "calibration": {
                "temperature": cal.temperature,
                "confidence_threshold": cal.confidence_threshold,
                "ood_threshold": cal.ood_threshold,
                "slope": cal.slope,
                "ood_weight": cal.ood_weight,
                "bias": cal.bias,
                **cal.fitted_on,
            },
            "rows": rows,
        }
        print(
            f"\n{ckpt}  T={cal.temperature:.2f} conf_thr={cal.confidence_threshold:.3f} "
            f"ood_thr={cal.ood_threshold:.2f} (val acc {cal.fitted_on['validation_accuracy']:.3f})"
        )
        keys = [
            "set",
            "n",
            "exact",
            "f1",
            "en",
            "zh",
            "f1_en",
            "f1_zh",
            "ece_raw",
            "ece_cal",
            "cov95_raw",
            "cov95",
            "abstain",
            "acc_routed",
        ]
        print(" ".join(f"{k:>9}" for k in keys))
        for r in rows:
            print(
                " ".join(
                    f"{r[k]:>9.3f}" if isinstance(r[k], float) else f"{r[k]!s:>9}" for k in keys
                )
            )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
