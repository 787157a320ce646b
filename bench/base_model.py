"""Tuning a Gemma 3 270M-dimension base on this machine: step times and peak memory.

What it measures (random weights, `ModelConfig.gemma3_270m()`, vocabulary 262,144):

1. the Hugging Face round trip at full size: `save_hf` of the random model, then
   `load_hf` of that directory (the model the rest of the run tunes);
2. one LoRA SFT step (adapters on every projection, AdamW over the adapters only; the
   same `accumulated_grads` + optax step the train loop jits), batch `--batch` of
   `--seq` tokens with the loss on the second half: compile time, then the mean of
   `--steps` steady steps;
3. one GRPO step with LoRA through the real `GRPOStep` on `train_loop` + `LMPolicy` (KV-cache sampler
   rollouts of `--prompts` x `--group` completions of `--new-tokens` tokens, reward,
   advantages, one clipped update): every step of `--grpo-steps`, split
   into rollout and update time (per step, with the sampler's and the update's trace
   counts: the sampler retraces once after the first update, so the third step is the
   steady one);
4. peak resident memory (`ru_maxrss`) after each phase.

Prints one JSON object. Keep it modest on shared CPUs:

    nice -n 10 .venv/bin/python bench/base_model.py            # f32, batch 4 x 64
    nice -n 10 .venv/bin/python bench/base_model.py --dtype bfloat16 --no-hf
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _lora_sft(model: Any, args: argparse.Namespace) -> dict[str, float]:
    from studio_align.training.accumulate import accumulated_grads
    from studio_align.training.optim import OptimConfig, make_optimizer
    from studio_align.training.sft import sft_loss

    rng = np.random.default_rng(0)
    b, t = args.batch, args.seq
    tokens = rng.integers(3, model.cfg.vocab_size, (1, b, t)).astype(np.int32)
    loss_mask = np.zeros((1, b, t), np.float32)
    loss_mask[..., t // 2 :] = 1.0
    batch = {
        "tokens": jnp.asarray(tokens),
        "attn": jnp.ones((1, b, t), bool),
        "loss": jnp.asarray(loss_mask),
    }
    tx, _ = make_optimizer(OptimConfig(learning_rate=1e-4), 1000)
    graphdef, params, rest = nnx.split(model, nnx.LoRAParam, ...)  # type: ignore[misc]
    opt_state = tx.init(params)

    def step(params: Any, rest: Any, opt_state: Any, batch: Any) -> tuple:
        metrics, grads, rest = accumulated_grads(
            sft_loss, nnx.LoRAParam, graphdef, params, rest, batch
        )
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), rest, opt_state, metrics

    jstep = jax.jit(step, donate_argnums=(0, 2))
    t0 = time.perf_counter()
    params, rest, opt_state, m = jstep(params, rest, opt_state, batch)
    jax.block_until_ready(m)
    first = time.perf_counter() - t0
    times, losses = [], [float(m["loss"])]
    for _ in range(args.steps):
        t0 = time.perf_counter()
        params, rest, opt_state, m = jstep(params, rest, opt_state, batch)
        jax.block_until_ready(m)
        times.append(time.perf_counter() - t0)
        losses.append(float(m["loss"]))
    nnx.update(model, params, rest)
    return {
        "first_step_s (compile + run)": round(first, 2),
        "step_s": round(float(np.mean(times)), 3),
        "step_s_min": round(float(np.min(times)), 3),
        "tokens_per_s": round(b * t / float(np.mean(times)), 1),
        "loss_first": round(losses[0], 4),
        "loss_last": round(losses[-1], 4),
        "trainable_params": int(
            sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.LoRAParam)))
        ),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }


def _grpo(model: Any, args: argparse.Namespace) -> dict[str, float]:
    from studio_align.testing.toy import pattern_reward
    from studio_align.training.checkpoint import CheckpointConfig
    from studio_align.training.grpo import GRPOConfig, GRPOStep, plugin_reward_fn
    from studio_align.training.loop import TrainConfig, TrainRunConfig, train_loop
    from studio_align.training.optim import OptimConfig
    from studio_align.training.policy import LMPolicy

    rng = np.random.default_rng(1)
    plen = 16
    high = min(5000, model.cfg.vocab_size)
    prompts = [rng.integers(3, high, plen).tolist() for _ in range(4 * args.prompts)]
    policy = LMPolicy(max_prompt_len=plen, max_new_tokens=args.new_tokens, pad_id=0, eos_id=1)
    cfg = GRPOConfig(prompts_per_step=args.prompts, group_size=args.group, dynamic_sampling=False)
    reward = plugin_reward_fn([pattern_reward([7, 8, 9, 10])])
    step = GRPOStep(policy, prompts, reward, cfg)
    run = TrainRunConfig(
        run_dir=None,
        train=TrainConfig(steps=args.grpo_steps, log_every=1, progress=False, metrics_hook=False),
        optim=OptimConfig(learning_rate=1e-4),
        checkpoint=CheckpointConfig(enabled=False),
    )
    steps: list[dict[str, Any]] = []
    stamps = [time.perf_counter()]

    def stamp(s: int, _: Any) -> bool:  # each step, once dispatched
        stamps.append(time.perf_counter())
        return False

    hist = train_loop(model, run, step, wrt=nnx.LoRAParam, name="grpo", stop=stamp).history
    for i, m in enumerate(hist):
        steps.append(
            {
                "step_s": round(stamps[i + 1] - stamps[i], 2),
                "rollout_s": round(m["time/rollout_s"], 2),
                "update_s": round(m["time/update_s"], 2),
                "update_traces": step.compiles,
            }
        )
    m = hist[-1]
    return {
        "samples_per_step": args.prompts * args.group,
        "prompt_tokens": plen,
        "new_tokens": args.new_tokens,
        "steps": steps,  # the first compiles; the last is the steady state
        "step_s": steps[-1]["step_s"],
        "rollout_s": steps[-1]["rollout_s"],
        "update_s": steps[-1]["update_s"],
        "completion_length": m["completion_length"],
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="gemma3_270m", choices=["gemma3_270m", "tiny"],
                    help="tiny: a smoke run of the script itself")  # fmt: skip
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3, help="steady SFT steps timed")
    ap.add_argument("--lora-rank", type=int, default=8)
    ap.add_argument("--prompts", type=int, default=2, help="GRPO prompts per step")
    ap.add_argument("--group", type=int, default=4, help="GRPO completions per prompt")
    ap.add_argument("--new-tokens", type=int, default=8)
    ap.add_argument("--grpo-steps", type=int, default=3, help="GRPO steps (>= 3 for a steady one)")
    ap.add_argument("--no-hf", action="store_true", help="skip the save_hf/load_hf round trip")
    args = ap.parse_args()

    from studio_align.models.config import LoraConfig, ModelConfig
    from studio_align.models.hf import load_hf, save_hf
    from studio_align.models.lora import add_lora
    from studio_align.models.transformer import Transformer

    out: dict[str, Any] = {
        "machine": {
            "cpu_count": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "jax_backend": jax.default_backend(),
            "devices": jax.device_count(),
        },
        "args": vars(args),
    }
    preset = getattr(ModelConfig, args.preset)
    cfg = preset(dtype=args.dtype, param_dtype=args.dtype, max_seq_len=2048)
    t0 = time.perf_counter()
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    jax.block_until_ready(nnx.state(model))
    out["model"] = {
        "params": cfg.num_params(),
        "params_without_embedding": cfg.num_params(include_embedding=False),
        "init_s": round(time.perf_counter() - t0, 2),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }
    if not args.no_hf:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp) / "gemma3-270m-random"
            t0 = time.perf_counter()
            save_hf(model, d)
            saved = time.perf_counter() - t0
            size = sum(f.stat().st_size for f in d.iterdir())
            del model
            t0 = time.perf_counter()
            model = load_hf(d, dtype=args.dtype, tokenizer=False).model
            jax.block_until_ready(nnx.state(model))
            out["hf_round_trip"] = {
                "save_s": round(saved, 2),
                "load_s": round(time.perf_counter() - t0, 2),
                "dir_mb": round(size / 2**20, 1),
                "peak_rss_mb": round(peak_rss_mb(), 1),
            }
    lora = LoraConfig(rank=args.lora_rank, alpha=2.0 * args.lora_rank, targets=(
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"))  # fmt: skip
    add_lora(model, lora, rngs=nnx.Rngs(1))
    out["lora_sft"] = _lora_sft(model, args)
    out["grpo_lora"] = _grpo(model, args)
    out["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
