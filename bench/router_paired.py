"""Two arms of a router study, paired by seed, each set's difference judged against its noise.

    python bench/router_paired.py --a 'RUNS/lever{seed}.json' --b 'RUNS/placebo{seed}.json' \
        --seeds 48 49 50 51 [--k 2.54] [--floor 2.0] [--noise 'OLD/lev{seed}.json:OLD/pla{seed}.json:52,53']

Reads the JSON that `bench/router_encoder.py` prints for each arm and seed, and prints, for
each validation set, the sets pooled (their rows together, as that script scores them) and
the generator's validation split: both arms' seed means, the mean of the paired differences A - B in points,
each seed's difference, and their standard deviation.

A set's mean difference moves with the seed: on the validation sets one seed's lever minus
placebo has a standard deviation of 1.6-6.4 points (docs/experiments/router-dialects.md),
so a fixed guard such as "no set falls by more than 2 points" rejects a harmless change on
one of nine sets most of the time. Here a set is flagged `drop` only when its mean
difference is below `-floor` *and* below `-c * sd / sqrt(n)`, where `c` is `k` widened to
Student's t for an sd estimated from few seeds (`autotune.acceptance.critical`, the test
autotune uses). `k` = 2.54 is a one-sided 0.5 %, so nine sets at once keep a false flag
near 5 %. `--noise` pools the sd with earlier paired runs of other seeds (each group's
differences about its own mean), so few fresh seeds still give a usable sd.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from studio_align.autotune.acceptance import critical, estimate_noise
from studio_align.router import eval as packaged

Run = Mapping[str, Any]


def differences(a: Sequence[Run], b: Sequence[Run], key: str) -> list[float]:
    """Per seed, arm A's exact accuracy on `key` minus arm B's, in points."""
    return [100 * (x[key]["exact"] - y[key]["exact"]) for x, y in zip(a, b, strict=True)]


def judge(diffs: Sequence[float], earlier: Sequence[Sequence[float]], k: float,
          floor: float) -> dict[str, Any]:  # fmt: skip
    """Mean, sd (pooled with `earlier` groups), the noise threshold, and the verdict."""
    noise = estimate_noise([diffs, *earlier])
    mean = statistics.fmean(diffs)
    threshold = critical(k, noise.dof) * noise.sigma / math.sqrt(len(diffs))
    verdict = "drop" if mean < -floor and mean < -threshold else ""
    if mean > floor and mean > threshold:
        verdict = "gain"
    return {"mean": mean, "sd": noise.sigma, "dof": noise.dof, "threshold": threshold,
            "verdict": verdict, "per_seed": list(diffs)}  # fmt: skip


def load(pattern: str, seeds: Sequence[int]) -> list[Run]:
    return [json.loads(Path(pattern.format(seed=s)).read_text()) for s in seeds]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="arm A's JSON path, with {seed}")
    ap.add_argument("--b", required=True, help="arm B's JSON path, with {seed}")
    ap.add_argument("--seeds", type=int, nargs="+", required=True)
    ap.add_argument("--k", type=float, default=2.54, help="normal quantile of the test")
    ap.add_argument("--floor", type=float, default=2.0, help="points below which nothing flags")
    ap.add_argument("--noise", action="append", default=[],
                    help="earlier paired runs for the sd: 'A_PATTERN:B_PATTERN:S1,S2,...'")  # fmt: skip
    args = ap.parse_args(argv)
    a, b = load(args.a, args.seeds), load(args.b, args.seeds)
    earlier = []
    for spec in args.noise:
        pa, pb, seeds = spec.rsplit(":", 2)
        ss = [int(s) for s in seeds.split(",")]
        earlier.append((load(pa, ss), load(pb, ss)))
    keys = [
        k
        for k in (*packaged.VAL_SETS, "pooled", "styled", "rest", "multi_step", "one_step", "val")
        if k in a[0]
    ]
    print(
        f"{'set':20s} {'A':>7s} {'B':>7s} {'A-B':>6s} {'sd':>5s} {'noise':>6s}  verdict  per seed"
    )
    for key in keys:
        d = differences(a, b, key)
        old = [differences(x, y, key) for x, y in earlier]
        j = judge(d, old, args.k, args.floor)
        ma = statistics.fmean(r[key]["exact"] for r in a)
        mb = statistics.fmean(r[key]["exact"] for r in b)
        seeds = ", ".join(f"{x:+.1f}" for x in d)
        print(f"{key:20s} {ma:7.3f} {mb:7.3f} {j['mean']:+6.1f} {j['sd']:5.1f} "
              f"{-j['threshold']:+6.1f}  {j['verdict']:7s}  {seeds}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
