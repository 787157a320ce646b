"""Overlapped (async) against synchronous rollout on the toy GRPO task, same seeds.

    python bench/grpo_async.py                     # seeds 0 1 2, 40 steps each
    python bench/grpo_async.py --seeds 0 --steps 12
    XLA_FLAGS=--xla_force_host_platform_device_count=8 \
        python bench/grpo_async.py --modes async split --rollout-devices 4

`--modes` picks among `sync`, `async` (overlapped, sampling on the training mesh) and
`split` (overlapped, sampling on the last `--rollout-devices` devices, training on the
rest: `grpo.rollout_devices`); the speed-ups are against the first mode listed.

The task is the LM answer task of `tests/test_training_grpo.py` (`<bos> a b` ->
`[ANSWER0 + a, <eos>]`, a tiny Transformer, 4 prompts x 8 samples, mu 2 (`--mu`), lr
5e-3; the stale rollout corrected by `--correction`, default decoupled PPO). For
each seed it trains once per mode (interleaved, in this one process, so all see the same
load) and prints one JSON line per run: `steady_step_s` (median wall time of steps 4..N,
as the trainer returns them: compile and warm-up excluded), `completions_per_s` (the 32
trained completions of a step over it), `wall_s` (the whole `train()`), the reward at the start (mean of
steps 1-2) and the end (mean of the last 5), then one summary line with the medians and
the speed-ups (the first mode's step time / each other mode's).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import jax
import numpy as np
from flax import nnx

from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer
from studio_align.testing import toy
from studio_align.training.checkpoint import CheckpointConfig
from studio_align.training.grpo import GRPOConfig, GRPOStep, plugin_reward_fn
from studio_align.training.loop import TrainConfig, TrainRunConfig, train_loop
from studio_align.training.optim import OptimConfig
from studio_align.training.policy import LMPolicy


def run(
    seed: int,
    steps: int,
    mode: str,
    mu: int = 2,
    correction: str = "decoupled",
    rollout_devices: int = 4,
) -> dict:
    pol = LMPolicy(max_prompt_len=4, max_new_tokens=4, pad_id=toy.PAD, eos_id=toy.EOS)
    cfg = GRPOConfig(prompts_per_step=4, group_size=8, mu=mu, async_rollout=mode != "sync",
                     async_correction=correction,
                     rollout_devices=rollout_devices if mode == "split" else 0)  # fmt: skip
    model = Transformer(ModelConfig.tiny(toy.VOCAB), rngs=nnx.Rngs(seed))
    t = GRPOStep(pol, toy.answer_prompts(), plugin_reward_fn([toy.answer_reward]), cfg)
    run_cfg = TrainRunConfig(
        run_dir=None,
        train=TrainConfig(steps=steps, seed=seed, log_every=1, progress=False, metrics_hook=False),
        optim=OptimConfig(learning_rate=5e-3, decay="constant"),
        checkpoint=CheckpointConfig(enabled=False),
    )
    stamps: list[float] = []
    step = t.step

    def timed_step(*a):  # type: ignore[no-untyped-def]
        out = step(*a)
        stamps.append(time.perf_counter())
        return out

    t.step = timed_step  # type: ignore[method-assign]
    t0 = time.perf_counter()
    result = train_loop(model, run_cfg, t, name="grpo")
    wall = time.perf_counter() - t0
    curve = [h["reward/total/mean"] for h in result.history]
    intervals = np.diff(stamps[2:])  # steps 4..N
    return {
        "mode": mode,
        "seed": seed,
        "devices": len(jax.devices()),
        "steps": steps,
        "steady_step_s": round(float(np.median(intervals)), 4),
        "completions_per_s": round(32 / float(np.median(intervals)), 1),
        "wall_s": round(wall, 2),
        "reward_start": round(float(np.mean(curve[:2])), 3),
        "reward_end": round(float(np.mean(curve[-5:])), 3),
        "compiles": result.compiles,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--mu", type=int, default=2, help="optimisation passes per rollout")
    ap.add_argument("--correction", choices=("decoupled", "clip"), default="decoupled")
    ap.add_argument("--modes", nargs="+", choices=("sync", "async", "split"),
                    default=["sync", "async"])  # fmt: skip
    ap.add_argument("--rollout-devices", type=int, default=4, help="split mode's rollout devices")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    rows = []
    for seed in args.seeds:
        for mode in args.modes:  # interleaved: every mode sees the same load
            rows.append(run(seed, args.steps, mode, args.mu, args.correction, args.rollout_devices))
            print(json.dumps(rows[-1]), flush=True)
    keys = ("steady_step_s", "completions_per_s", "wall_s", "reward_end")
    med = {m: {k: statistics.median(r[k] for r in rows if r["mode"] == m) for k in keys}
           for m in args.modes}  # fmt: skip
    first = args.modes[0]
    print(json.dumps({
        "summary": med,
        "speedup_step": {m: round(med[first]["steady_step_s"] / med[m]["steady_step_s"], 3)
                         for m in args.modes[1:]},
        "speedup_wall": {m: round(med[first]["wall_s"] / med[m]["wall_s"], 3)
                         for m in args.modes[1:]},
        "load_avg_1m": [round(load, 2), round(os.getloadavg()[0], 2)],
    }))  # fmt: skip


if __name__ == "__main__":
    main()
