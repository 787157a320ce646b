"""Grading renderer throughput in megapixels per second; prints one JSON object.

For each size (default 512x512 and 2048x2048 single images, and a GRPO-shaped batch of
128 images at 64x64) and each backend (numpy; jax, jitted, compile excluded and
reported separately), the best of `--repeats` timed calls with random parameters.

Usage: `python bench/render.py [--repeats 5]`
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

from studio_align.verticals.grading.renderer import N_PARAMS, render


def _time(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    cases = {"512x512": (1, 512), "2048x2048": (1, 2048), "batch128x64x64": (128, 64)}
    out: dict[str, object] = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "repeats": args.repeats,
    }
    results = {}
    for name, (n, side) in cases.items():
        x = rng.random((n, side, side, 3), dtype=np.float32)
        p = rng.uniform(-1, 1, (n, N_PARAMS)).astype(np.float32)
        mp = n * side * side / 1e6
        row = {"megapixels": mp}
        for backend in ("numpy", "jax"):
            t0 = time.perf_counter()
            render(x, p, backend=backend)
            first = time.perf_counter() - t0
            best = _time(lambda x=x, p=p, b=backend: render(x, p, backend=b), args.repeats)
            row[backend] = {"mp_per_s": round(mp / best, 2), "first_call_s": round(first, 3)}
        results[name] = row
    out["render"] = results
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
