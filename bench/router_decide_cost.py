"""Where a served router's CPU goes: process CPU time of each part of `Router.decide`.

    python bench/router_decide_cost.py OUT/router [--set handwritten_v1] [--batch 8]

Loads the checkpoint (with its calibration and memory, if saved), warms every batch of
the set's requests, then times by process CPU time (all threads, so a loaded machine
changes the shares little) for each batch of `--batch` requests: `encode` (tokenizing),
`analyse` (the constrained decode with its analysis), `memory_keys` (the pretrained
encoder's sentence vectors the memory compares, as `decide` gets them: from the decoding
pass where the sampler computed them), `sentence_pass` (the same vectors by a separate
encoder pass, as `embed` computes them for feedback) and the whole `decide`. Prints one
JSON object of mean milliseconds per batch, and the load.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from studio_align.router import eval as packaged
from studio_align.router.router import Router


def cpu(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    t0 = time.process_time()
    out = fn(*args)
    return out, time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--set", default="handwritten_v1", choices=packaged.SETS)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    router = Router.load(args.checkpoint)
    reqs = [row["request"] for row in packaged.load(args.set)]
    full = len(reqs) // args.batch * args.batch
    batches = [reqs[i : i + args.batch] for i in range(0, full, args.batch)]
    for b in batches:  # compile every shape these batches reach
        router.decide(b)
        router.memory_keys(router.encode(b)[0])
    load = os.getloadavg()[0]
    parts = {"encode": 0.0, "analyse": 0.0, "memory_keys": 0.0, "sentence_pass": 0.0,
             "decide": 0.0}  # fmt: skip
    for _ in range(args.repeats):
        for b in batches:
            (prompts, inits), t = cpu(router.encode, b)
            parts["encode"] += t
            (_, an), t = cpu(router._analyse, prompts, inits)
            parts["analyse"] += t
            parts["memory_keys"] += cpu(router.memory_keys, prompts, an)[1]
            parts["sentence_pass"] += cpu(router.memory_keys, prompts)[1]
            parts["decide"] += cpu(router.decide, b)[1]
    n = args.repeats * len(batches)
    print(json.dumps({
        "checkpoint": str(args.checkpoint), "set": args.set, "batch": args.batch,
        "batches": len(batches), "memory_key": router.memory_key,
        "memory_exemplars": 0 if router.memory is None else len(router.memory),
        "cpu_ms_per_batch": {k: round(v / n * 1000, 2) for k, v in parts.items()},
        "load_avg_1m": [round(load, 2), round(os.getloadavg()[0], 2)],
    }))  # fmt: skip


if __name__ == "__main__":
    main()
