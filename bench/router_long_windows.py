"""Long requests with and without windows of sentences (`router/windows.py`), or with
windows and without and with the ask detector (`router/asks.py`, `--asks`), on the
quickstart's SFT and served routers of several seeds.

    python bench/router_long_windows.py RUNS [--seeds 0 1 2] [--windows 0.25] [--asks] \
        [--sets handwritten_val11 handwritten_val12] [--latency]

RUNS/qsN is `studio-align quickstart --out RUNS/qsN --set seed=N` (router stages are
enough). Each checkpoint is routed as served (its calibration and plan prior), once with
its prior's `windows` set to 0 and once to `--windows` (with `--asks`: both at `--windows`,
its `asks` off, then on). Prints, per router and set, the
means over the seeds (and each seed) of exact-plan accuracy, the abstain rate, the rate of
wrong plans routed (not abstained), and on the *agreed* rows (label == the simulated
creators' majority plan; measurement only) exact accuracy and wrong plans routed.
`--latency` instead times `decide` on one request at a time (the first seed's served
router, warmed up, each set's requests three times, without and with windows interleaved
twice) and prints the p50 and p90 in milliseconds of wall time, and the load.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
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


Arm = tuple[float, bool]  # the prior's (windows, asks)


def arm_name(arm: Arm) -> str:
    return f"windows {arm[0]:g}" + (", asks" if arm[1] else "")


def latency(router: Router, requests: Sequence[Any], arm: Arm) -> list[float]:
    """Milliseconds of `decide` on each of `requests`, one at a time."""
    assert router.prior is not None
    router.prior.windows, router.prior.asks = arm
    out = []
    for r in requests:
        t0 = time.perf_counter()
        router.decide([r])
        out.append(1000 * (time.perf_counter() - t0))
    return out


def time_it(path: Path, requests: Sequence[Any], arms: Sequence[Arm]) -> None:
    router = Router.load(path)
    router.warmup([1])
    for x in arms:
        latency(router, requests, x)  # the first call of each shape is not timed
    times: dict[Arm, list[float]] = {x: [] for x in arms}
    load = os.getloadavg()[0]
    for _ in range(2):
        for x in arms:
            times[x] += latency(router, list(requests) * 3, x)
    for x, t in times.items():
        print(f"{arm_name(x)}: p50 {np.percentile(t, 50):.1f} ms, p90 {np.percentile(t, 90):.1f} ms "
              f"({len(t)} requests)")  # fmt: skip
    print(f"load {load:.2f} -> {os.getloadavg()[0]:.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--windows", type=float, default=0.25)
    ap.add_argument("--sets", nargs="+", default=["handwritten_val11", "handwritten_val12"])
    ap.add_argument(
        "--asks", action="store_true", help="windows without, then with, the ask detector"
    )
    ap.add_argument("--latency", action="store_true", help="time decide one request at a time")
    args = ap.parse_args(argv)
    sets = {n: packaged.load(n) for n in args.sets}
    arms: list[Arm] = [(args.windows, False), (args.windows, True)] if args.asks else \
        [(0.0, False), (args.windows, False)]  # fmt: skip
    if args.latency:
        reqs = [r["request"] for rows in sets.values() for r in rows]
        time_it(args.runs / f"qs{args.seeds[0]}" / ROUTERS["served"], reqs, arms)
        return 0
    res: dict[tuple[str, str, Arm], list[dict[str, float]]] = {}
    for seed in args.seeds:
        for who, rel in ROUTERS.items():
            router = Router.load(args.runs / f"qs{seed}" / rel)
            if router.prior is None:
                print(f"{args.runs}/qs{seed}/{rel}: no plan prior, so no windows", file=sys.stderr)
                return 1
            for arm in arms:
                router.prior.windows, router.prior.asks = arm
                for name, rows in sets.items():
                    res.setdefault((who, name, arm), []).append(score(router, rows))
    print("| router | set | arm | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 3) + "|")
    for (who, name, arm), runs in res.items():
        cells = [f"{np.mean([r[c] for r in runs]):.3f} ({', '.join(f'{r[c]:.3f}' for r in runs)})"
                 for c in COLUMNS]  # fmt: skip
        print(f"| {who} | {name} | {arm_name(arm)} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
