"""Does more hand-written calibration data help? Two-fold check on validation only (issue 14).

    python bench/router_calibration_data.py CKPT --data OUT/data [--target 0.95]

The quickstart fits temperature and abstain thresholds on `handwritten_val` + 80 generator
validation examples. This splits `handwritten_val2` into two halves (alternate rows, so
both languages and styles fall in each); for each half as the test fold it fits the
calibration twice, on the quickstart's set alone (`base`) and with the other half added
(`more`), and scores ECE, coverage at the target selective accuracy and the accuracy of
the routed requests on the test fold. Evaluation sets are not touched.
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--data", type=Path, required=True, help="quickstart OUT/data")
    ap.add_argument("--target", type=float, default=0.95)
    args = ap.parse_args(argv)
    train = read_examples(args.data / "train.jsonl")
    base_val = packaged.load("handwritten_val") + read_examples(args.data / "val.jsonl")[:80]
    v2 = packaged.load("handwritten_val2")
    folds = [v2[0::2], v2[1::2]]
    router = Router.load(args.checkpoint)
    out: dict[str, Any] = {}
    for k, test in enumerate(folds):
        other = folds[1 - k]
        for name, val in (("base", base_val), ("more", base_val + other)):
            router.calibration = None
            cal = fit_calibration(router, train, val, target=args.target)
            f = evaluate_router(router, test, batch_size=128)[0]
            out[f"fold{k}_{name}"] = {
                "n_fit": len(val),
                "temperature": cal.temperature,
                "ece": f["ece"],
                "ece_raw": f["ece_uncalibrated"],
                "cov95": f["selective"]["coverage_at_target"],
                "abstain": f.get("abstain_rate"),
                "acc_routed": f.get("accuracy_when_routed"),
            }
            print(f"fold{k} {name}: {json.dumps(out[f'fold{k}_{name}'])}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
