"""Algorithms benchmark: DPO pairs/s and GRPO samples/s (rollout and update apart).

Prints one JSON object. Everything runs on the default router config
(`ModelConfig.router`, a tokenizer trained on the demo requests, the default catalog's
plan grammar) with real data from the simulated creators' route logs:

- `dpo`: the shared train loop on `route_dpo_pairs` (each pair = chosen + rejected, one
  concatenated forward/backward), `--dpo-batch` pairs per step, sigmoid DPO. Pairs/s
  is measured over the second half of the steps (after compilation), as the train loop
  logs it. The reference pass (cached afterwards) is timed separately.
- `grpo`: `--prompts` prompts x `--group` samples per step from the KV-cache sampler
  under the plan grammar, rewards `intent_accuracy` + `plan_validity` from the plugin
  host, one update per step (mu = 1). Rollout samples/s (sampling + rewards) and update
  samples/s (reference log-probs + forward/backward/optimizer) are medians over the steps
  after the first (which compiles). Dynamic sampling is off so every step has the same
  number of samples.

Usage: `python bench/algorithms.py [--steps 10] [--dpo-batch 16] [--prompts 8 --group 8]`
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import jax
import numpy as np
from flax import nnx


def _setup(vocab: int, seed: int) -> dict:
    from studio_align.catalog import default_catalog
    from studio_align.data.compile import compile_logs, read_records
    from studio_align.router.data import write_jsonl
    from studio_align.router.format import build_tokenizer
    from studio_align.simulate.router.creators import demo_creator_data

    tmp = Path(tempfile.mkdtemp(prefix="bench-alg-"))
    data = demo_creator_data(seed=seed, n_train_creators=24, n_eval_creators=2)
    logs = write_jsonl(tmp / "routes.jsonl", data["route_logs"])
    compile_logs(logs, tmp / "compiled", seed=seed, heldout_fraction=0.1)
    catalog = default_catalog()
    tok = build_tokenizer([e["request"]["text"] for e in data["route_logs"]], catalog, vocab)
    pairs = [r.model_dump() for r in read_records(tmp / "compiled", "route_dpo_pairs")]
    examples = [r.model_dump() for r in read_records(tmp / "compiled", "routing_examples")]
    return {"tmp": tmp, "catalog": catalog, "tok": tok, "pairs": pairs, "examples": examples}


def bench_dpo(env: dict, *, steps: int, batch: int) -> dict:
    from studio_align.models.config import ModelConfig
    from studio_align.models.transformer import Transformer
    from studio_align.router.task import RouterTask
    from studio_align.tasks import StartingPoint
    from studio_align.training.batches import ArrayBatches
    from studio_align.training.dpo import DPOConfig, make_dpo_loss, reference_logps
    from studio_align.training.loop import TrainConfig, TrainRunConfig, train_loop
    from studio_align.training.packing import pack_pairs
    from studio_align.training.supervised import supervised

    tok = env["tok"]
    cfg = ModelConfig.router(tok.vocab_size)
    policy = Transformer(cfg, rngs=nnx.Rngs(0))
    ref = Transformer(cfg, rngs=nnx.Rngs(0))
    start = StartingPoint(policy, ref, tokenizer=tok)
    pairs = RouterTask(env["catalog"]).preference_pairs(start, env["pairs"])
    arrays = pack_pairs(*pairs, pad_id=tok.pad_id)
    t0 = time.perf_counter()
    ref_lp, _ = reference_logps(ref, arrays, batch_size=64, cache_dir=env["tmp"] / "cache")
    t_ref = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, hit = reference_logps(ref, arrays, batch_size=64, cache_dir=env["tmp"] / "cache")
    t_hit = time.perf_counter() - t0
    run = TrainRunConfig(
        run_dir=env["tmp"] / "dpo",
        train=TrainConfig(steps=steps, batch_size=batch, log_every=max(1, steps // 2), progress=False, metrics_hook=False),
    )  # fmt: skip
    run.checkpoint.every = 0
    run.checkpoint.async_save = False
    res = train_loop(
        policy,
        run,
        supervised(make_dpo_loss(DPOConfig()), ArrayBatches({**arrays, **ref_lp}, batch)),
        name="dpo",
    )
    return {
        "pairs_per_s": round(res.metrics["examples_per_s"], 2),
        "step_s": round(1.0 / res.metrics["steps_per_s"], 4),
        "batch_pairs": batch,
        "seq_len": int(arrays["chosen_tokens"].shape[1]),
        "dataset_pairs": len(arrays["chosen_tokens"]),
        "reference_pass_s": round(t_ref, 3),
        "reference_pass_pairs_per_s": round(len(arrays["chosen_tokens"]) / t_ref, 1),
        "reference_cache_hit_s": round(t_hit, 4),
        "cache_hit": hit,
        "compiles": res.compiles,
    }


def bench_grpo(env: dict, *, steps: int, prompts: int, group: int) -> dict:
    from studio_align.models.config import ModelConfig
    from studio_align.models.transformer import Transformer
    from studio_align.plugins import get_host
    from studio_align.router.task import RouterTask
    from studio_align.tasks import StartingPoint
    from studio_align.training.checkpoint import CheckpointConfig
    from studio_align.training.grpo import GRPOConfig, GRPOStep, plugin_reward_fn
    from studio_align.training.grpo_run import SamplingSection
    from studio_align.training.loop import TrainConfig, TrainRunConfig, train_loop
    from studio_align.training.optim import OptimConfig

    tok, catalog = env["tok"], env["catalog"]
    cfg = ModelConfig.router(tok.vocab_size)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    ref = Transformer(cfg, rngs=nnx.Rngs(0))
    task = RouterTask(catalog)
    start = StartingPoint(model, ref, nnx.Param, tok, {"catalog": catalog, "max_steps": 3})
    records = task.grpo_prompts(start, env["examples"])
    longest = max(len(r["prompt"]) for r in records)
    policy = task.policy(start, SamplingSection(), max_prompt_len=-(-longest // 8) * 8)
    host = get_host()
    weights = {"intent_accuracy": 1.0, "plan_validity": 0.5}
    reward_fn = plugin_reward_fn(
        {k: host.rewards[k] for k in weights}, weights, context={"catalog": catalog}
    )
    gcfg = GRPOConfig(prompts_per_step=prompts, group_size=group, beta=0.04, dynamic_sampling=False)
    run = TrainRunConfig(
        run_dir=None,
        train=TrainConfig(steps=steps, log_every=1, progress=False, metrics_hook=False),
        optim=OptimConfig(learning_rate=1e-5),
        checkpoint=CheckpointConfig(enabled=False),
    )
    res = train_loop(
        model, run, GRPOStep(policy, records, reward_fn, gcfg, ref_model=ref), name="grpo"
    )
    hist = res.history
    n = prompts * group
    roll = [h["time/rollout_s"] for h in hist[1:]]
    upd = [h["time/update_s"] for h in hist[1:]]
    return {
        "rollout_samples_per_s": round(n / float(np.median(roll)), 2),
        "update_samples_per_s": round(n / float(np.median(upd)), 2),
        "rollout_step_s": round(float(np.median(roll)), 4),
        "update_step_s": round(float(np.median(upd)), 4),
        "first_step_s": round(hist[0]["time/rollout_s"] + hist[0]["time/update_s"], 2),
        "samples_per_step": n,
        "max_new_tokens": policy.max_new_tokens,
        "prompt_len": policy.max_prompt_len,
        "compiles": res.compiles,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--dpo-batch", type=int, default=16)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    env = _setup(args.vocab, args.seed)
    out = {
        "machine": {
            "backend": jax.default_backend(),
            "devices": len(jax.devices()),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "model": "ModelConfig.router",
        "vocab_size": env["tok"].vocab_size,
        "dpo": bench_dpo(env, steps=args.steps, batch=args.dpo_batch),
        "grpo": bench_grpo(env, steps=args.steps, prompts=args.prompts, group=args.group),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
