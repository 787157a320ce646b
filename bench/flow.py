"""Flow vertical benchmark: sampling images/s, Flow-GRPO step split, Diffusion-DPO pairs/s.

Prints one JSON object (with `uptime`: on a shared machine the load average matters).
Everything uses the packaged base weights (`verticals/flow/weights/base.safetensors`):

- `sampling`: Euler ODE, `--ode-steps` (20) steps, guidance 1 (one forward per step) and
  guidance 3 (a doubled batch), at batch 1 and 64. Images/s is the median over `--repeats`
  calls after a warm-up call (which compiles); the compile count is reported.
- `grpo`: `FlowPolicy` SDE rollouts (`--sde-steps` 8) of `--prompts` x `--group` samples
  and one clipped update with the k3 KL to the base (beta 0.01), reward = mean brightness
  (a reward plugin costs host time that is not the engine's). Each step waits for its new
  weights; step, rollout and update (step minus rollout) seconds are medians over the
  steps after the first (which compiles).
- `dpo`: Diffusion-DPO through the shared train loop on random pairs, `--dpo-batch` pairs
  per step (policy: 2 forwards + backward, reference: 2 forwards); pairs/s as the loop
  logs it over the second half of the steps.

Usage: `python bench/flow.py [--repeats 5] [--grpo-steps 4] [--dpo-steps 20]`
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import tempfile
import time

import jax
import numpy as np
from flax import nnx

from studio_align.generation import flow_sampler as fs
from studio_align.models.flow import param_count
from studio_align.rewards import Reward
from studio_align.verticals.flow.align import (
    FlowDPOConfig,
    FlowGRPOConfig,
    flow_dpo,
    flow_grpo,
)
from studio_align.verticals.flow.checkpoint import clone, load_flow
from studio_align.verticals.flow.evaluate import TRAIN_TAG_SETS, conditions


def bench_sampling(model, steps: int, repeats: int) -> dict:
    verts, tags = conditions(TRAIN_TAG_SETS)
    out = {}
    for guidance in (1.0, 3.0):
        for batch in (1, 64):
            idx = np.arange(batch) % len(verts)
            fs.sample_ode(model, verts[idx], tags[idx], steps=steps, guidance=guidance)
            times = []
            for r in range(repeats):
                t0 = time.perf_counter()
                fs.sample_ode(model, verts[idx], tags[idx], steps=steps, guidance=guidance, seed=r)
                times.append(time.perf_counter() - t0)
            out[f"guidance{guidance:g}/batch{batch}/images_per_s"] = batch / float(np.median(times))
    out["compiles"] = fs.compile_count()
    return out


def bench_grpo(model, steps: int, prompts: int, group: int, sde_steps: int) -> dict:
    verts, tags = conditions(TRAIN_TAG_SETS)
    cfg = FlowGRPOConfig.model_validate(
        {"train": {"steps": steps}, "prompts_per_step": prompts, "group_size": group,
         "sde_steps": sde_steps, "weights": {"brightness": 1.0}, "beta": 0.01}
    )  # fmt: skip
    bright = Reward("brightness", lambda images: [float(np.mean(i)) for i in images])
    # The trainer dispatches an update and returns before it runs (no host sync), so its
    # own `time/update_s` is only the launch. Here every step ends by waiting for the new
    # weights: a step's wall time is exact, and its update is that minus its rollout.
    marks: list[float] = []

    def synced(m) -> bool:
        jax.block_until_ready(nnx.state(m))
        marks.append(time.perf_counter())
        return False

    hist = flow_grpo(clone(model), model, verts, tags, cfg, rewards={"brightness": bright},
                     stop=synced, check_every=1)  # fmt: skip
    step = np.diff(marks)  # steps 2..n: after the first (which compiles)
    roll = np.array([h["time/rollout_s"] for h in hist[1:]])
    n = prompts * group
    return {
        "samples_per_step": n,
        "sde_steps": sde_steps,
        "step_s": float(np.median(step)),
        "rollout_s": float(np.median(roll)),
        "update_s": float(np.median(step - roll)),
        "samples_per_s": n / float(np.median(step)),
    }


def bench_dpo(model, steps: int, batch: int) -> dict:
    rng = np.random.default_rng(0)
    n = 256
    shape = (n, model.cfg.image_size, model.cfg.image_size, model.cfg.channels)
    verts, tags = conditions(TRAIN_TAG_SETS)
    idx = rng.integers(0, len(verts), n)
    pairs = {
        "xw": rng.uniform(-1, 1, shape).astype(np.float32),
        "xl": rng.uniform(-1, 1, shape).astype(np.float32),
        "vertical": verts[idx],
        "tags": tags[idx],
    }
    with tempfile.TemporaryDirectory() as d:
        res = flow_dpo(clone(model), model, pairs, FlowDPOConfig(steps=steps, batch_size=batch),
                       run_dir=d)  # fmt: skip
    half = [h for h in res.history if "examples_per_s" in h][len(res.history) // 2 :]
    return {
        "pairs_per_step": batch,
        "pairs_per_s": float(np.median([h["examples_per_s"] for h in half])),
        "compiles": res.compiles,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ode-steps", type=int, default=20)
    ap.add_argument("--grpo-steps", type=int, default=4)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--sde-steps", type=int, default=8)
    ap.add_argument("--dpo-steps", type=int, default=20)
    ap.add_argument("--dpo-batch", type=int, default=32)
    args = ap.parse_args()
    model, _ = load_flow()
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    out = {
        "device": str(jax.devices()[0]),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "params": param_count(model),
        "uptime_before": uptime,
        "sampling": bench_sampling(model, args.ode_steps, args.repeats),
        "grpo": bench_grpo(model, args.grpo_steps, args.prompts, args.group, args.sde_steps),
        "dpo": bench_dpo(model, args.dpo_steps, args.dpo_batch),
        "uptime_after": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
