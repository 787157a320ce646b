"""Long requests with and without windows of sentences (`router/windows.py`), on the
quickstart's SFT and served routers of several seeds.

    python bench/router_long_windows.py RUNS [--seeds 0 1 2] [--windows 0.25] \
        [--sets handwritten_val11 handwritten_val12]

RUNS/qsN is `studio-align quickstart --out RUNS/qsN --set seed=N` (router stages are
enough). Each checkpoint is routed as served (its calibration and plan prior), once with
its prior's `windows` set to 0 and once to `--windows`. Prints, per router and set, the
means over the seeds (and each seed) of exact-plan accuracy, the abstain rate, the rate of
wrong plans routed (not abstained), and on the *agreed* rows (label == the simulated
creators' majority plan; measurement only) exact accuracy and wrong plans routed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from studio_align.router import eval as packaged
from studio_align.router.router import Router
from studio_align.simulate.router.creators import majority_plans

ROUTERS = {"sft": "stages/sft/model", "served": "router"}
COLUMNS = ("exact", "abstain", "wrong", "agreed_exact", "agreed_wrong")


def score(router: Router, rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Exact, abstain and routed-wrong rates of `router.decide` on `rows`, all and agreed."""
    ds = router.decide([r["request"] for r in rows])
    agreed = [
        list(m["plan"]) == list(r["plan"]) for m, r in zip(majority_plans(rows), rows, strict=True)
    ]
    right = np.array([d["plan"] == list(r["plan"]) for d, r in zip(ds, rows, strict=True)])
    abstain = np.array([bool(d["abstain"]) for d in ds])
    wrong = ~right & ~abstain
    mask = np.array(agreed)
    return {
        "exact": float(right.mean()), "abstain": float(abstain.mean()), "wrong": float(wrong.mean()),
        "agreed_exact": float(right[mask].mean()), "agreed_wrong": float(wrong[mask].mean()),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--windows", type=float, default=0.25)
    ap.add_argument("--sets", nargs="+", default=["handwritten_val11", "handwritten_val12"])
    args = ap.parse_args(argv)
    sets = {n: packaged.load(n) for n in args.sets}
    res: dict[tuple[str, str, float], list[dict[str, float]]] = {}
    for seed in args.seeds:
        for who, rel in ROUTERS.items():
            router = Router.load(args.runs / f"qs{seed}" / rel)
            if router.prior is None:
                print(f"{args.runs}/qs{seed}/{rel}: no plan prior, so no windows", file=sys.stderr)
                return 1
            for w in (0.0, args.windows):
                router.prior.windows = w
                for name, rows in sets.items():
                    res.setdefault((who, name, w), []).append(score(router, rows))
    print("| router | set | windows | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 3) + "|")
    for (who, name, w), runs in res.items():
        cells = [f"{np.mean([r[c] for r in runs]):.3f} ({', '.join(f'{r[c]:.3f}' for r in runs)})"
                 for c in COLUMNS]  # fmt: skip
        print(f"| {who} | {name} | {w:g} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
