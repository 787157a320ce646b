"""The quickstart's SFT and served routers on the long-message validation sets, with and
without their plan prior.

    python bench/router_long_messages.py RUNS [--seeds 0 1 2]

RUNS/qsN is `studio-align quickstart --out RUNS/qsN --set seed=N` (router stages are
enough). Each checkpoint (`stages/sft/model`, and `router`, the served one) is scored by
`Router.decide` with its own calibration, once as saved and once with its plan prior
removed (`router/prior.py`; a checkpoint without one scores the same twice). Sets:
`handwritten_val11` and `handwritten_val12`, whose every request is longer than the
96 text pieces a router reads. Prints, per (set, router, prior), the means over the seeds
of exact-plan accuracy (with each seed's), the abstain rate, and the share routed with a
wrong plan (not abstained, wrong).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from studio_align.router import eval as packaged
from studio_align.router.router import Router

SETS = ("handwritten_val11", "handwritten_val12")
ROUTERS = {"sft": "stages/sft/model", "served": "router"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args(argv)
    print("| set | router | prior | exact (per seed) | abstain | routed wrong |")
    print("|---|---|---|---|---|---|")
    for name in SETS:
        rows = packaged.load(name)
        for label, sub in ROUTERS.items():
            for with_prior in (False, True):
                exact, abstain, wrong = [], [], []
                for seed in args.seeds:
                    router = Router.load(args.runs / f"qs{seed}" / sub)
                    if not with_prior:
                        router.prior = None
                    ds = router.decide([r["request"] for r in rows])
                    ok = np.array([d["plan"] == r["plan"] for d, r in zip(ds, rows, strict=True)])
                    off = np.array([d["abstain"] for d in ds])
                    exact.append(ok.mean())
                    abstain.append(off.mean())
                    wrong.append((~ok & ~off).mean())
                seeds = " ".join(f"{x:.3f}" for x in exact)
                print(f"| {name} | {label} | {'with' if with_prior else 'without'} | "
                      f"{np.mean(exact):.3f} ({seeds}) | {np.mean(abstain):.3f} | "
                      f"{np.mean(wrong):.3f} |", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
