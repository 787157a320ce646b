"""Continuous batching against the batch sampler when sample lengths vary.

    .venv/bin/python bench/continuous.py [--prompts 16 --group 4 --new-tokens 64
                                          --end-every 16 --slots 16 32 --repeats 3]

A random router-preset model (vocab 4096, d 256, 4 layers: the peer harness's dims)
continues `prompts` 16-token prompts `group` times each. One vocabulary id in
`end_every` is an end id, so a sample ends after about `end_every` tokens (geometric,
capped at `new_tokens`): the shape of a rollout whose samples stop at different points.
`batch` decodes every sample at once until the longest ends; `slots=S` decodes S rows at
a time, each ending row taking the next sample (`Sampler.sample(slots=S)`). Modes are
interleaved, `repeats` times each after one warm-up call; prints one JSON object with
generated tokens per second (median), seconds per call and the mean sample length.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
from flax import nnx

from studio_align.generation.sampler import Sampler
from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--end-every", type=int, default=16)
    ap.add_argument("--slots", type=int, nargs="*", default=[16, 32])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    cfg = ModelConfig.router(4096)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    ends = tuple(range(4, cfg.vocab_size, args.end_every))
    sampler = Sampler(model, eos_id=ends, pad_id=0)
    rng = np.random.default_rng(1)
    prompts = [rng.integers(4, cfg.vocab_size, 16).tolist() for _ in range(args.prompts)]
    modes = {"batch": 0, **{f"slots_{s}": s for s in args.slots}}
    times: dict[str, list[float]] = {m: [] for m in modes}
    tokens: dict[str, float] = {}
    load_before = os.getloadavg()[0]
    for r in range(args.repeats + 1):
        for name, slots in modes.items():
            t0 = time.perf_counter()
            out = sampler.sample(prompts, max_new_tokens=args.new_tokens, seed=r,
                                 group_size=args.group, slots=slots)  # fmt: skip
            dt = time.perf_counter() - t0
            if r:  # the first round compiles
                times[name].append(dt)
                tokens[name] = tokens.get(name, 0.0) + float(out.lengths.sum())
    res = {
        name: {
            "seconds": float(np.median(times[name])),
            "tokens_per_second": tokens[name] / float(np.sum(times[name])),
            "mean_length": tokens[name] / (args.repeats * args.prompts * args.group),
        }
        for name in modes
    }
    print(json.dumps({"args": vars(args), "load_before": load_before,
                      "load_after": os.getloadavg()[0], "modes": res}, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
