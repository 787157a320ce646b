"""The `train grpo` run: any task's prompts, its policy, plugin rewards, the shared loop.

The task supplies the prompts (`Task.grpo_prompts`), the policy that samples and scores
them (`Task.policy`) and batch-wide reward context (`Task.reward_context`); rewards are
the plugin host's, chosen by name with weights in `[rewards]`.

Design choices:
- The run config extends `TrainRunConfig` like every trainer's: `[train] steps`, `seed`
  and `log_every` (default 1: every step's rewards are worth a line), `[optim]`,
  `[checkpoint]`, `[mesh]`, `[distributed]`; GRPO runs on `train_loop` with its
  `GRPOStep`. A step's batch is `[grpo] prompts_per_step x group_size` completions, so
  `[train] batch_size`, `grad_accum` and `epochs` other than their defaults are refused
  rather than ignored.
- Held-out rewards are sampled with their own key (derived from the seed), never from the
  trainer's RNG stream, so evaluating before and after training does not change what a
  resumed run samples: a killed and resumed run is bitwise equal to an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np
from flax import nnx

from studio_align.errors import ConfigError
from studio_align.plugins import get_host
from studio_align.rewards import Reward
from studio_align.tasks import StartingPoint
from studio_align.training.distributed import maybe_initialize
from studio_align.training.grpo import GRPOStep, RewardFn, plugin_reward_fn
from studio_align.training.grpo_run_config import GRPORunConfig as GRPORunConfig
from studio_align.training.grpo_run_config import GRPOTrainConfig as GRPOTrainConfig
from studio_align.training.grpo_run_config import SamplingSection as SamplingSection
from studio_align.training.loop import train_loop
from studio_align.training.policy import Policy, prompt_width
from studio_align.training.run import (
    prepare_run_dir,
    read_split,
    resolve_task,
    save_for_task,
)

HELDOUT_STREAM = 7  # fold_in constant of the held-out sampling key


@dataclass
class GRPORunResult:
    history: list[dict[str, float]]
    heldout_before: dict[str, float]
    heldout_after: dict[str, float]
    checkpoint: Path
    run_dir: Path
    seconds: float


def heldout_reward(
    policy: Policy,
    reward_fn: RewardFn,
    model: nnx.Module,
    records: Sequence[Mapping[str, Any]],
    *,
    group_size: int = 1,
    key: jax.Array,
) -> dict[str, float]:
    """Mean rewards of fresh samples from `model` for held-out prompts."""
    if not records:
        return {}
    inputs = [r["prompt"] for r in records]
    rollout = policy.sample(model, inputs, group_size, key)
    per_sample = [r for r in records for _ in range(group_size)]
    total, metrics = reward_fn(per_sample, rollout)
    out = {k: v for k, v in metrics.items() if k.endswith("/mean")}
    out["reward/total/mean"] = float(np.mean(total))
    return out


def run_rewards(cfg: GRPORunConfig, host: Any) -> dict[str, Reward]:
    """The plugin rewards `[rewards]` names, checked before any model is loaded."""
    missing = sorted(set(cfg.rewards) - set(host.rewards))
    if missing:
        raise ConfigError(f"rewards: {missing} not registered (available: {sorted(host.rewards)})")
    rewards = {name: host.rewards[name] for name in cfg.rewards}
    return cfg.reward_call.apply(rewards)  # `[reward_call]` per-reward limits checked here


def train_grpo(
    cfg: GRPORunConfig, *, task: Any = None, start: StartingPoint | None = None, host: Any = None
) -> GRPORunResult:
    """Tune `task` (default: `cfg.task`) with GRPO on its prompts and the configured rewards."""
    maybe_initialize(cfg.distributed)
    task = resolve_task(task or cfg.task, "grpo")
    host = host or get_host()
    rewards = run_rewards(cfg, host)
    seed = cfg.train.seed
    start = start or task.start(cfg.model, seed=seed, reference=cfg.grpo.beta > 0)
    train = task.grpo_prompts(start, read_split(task, cfg.data, "grpo", "train"))
    held = task.grpo_prompts(start, read_split(task, cfg.data, "grpo", "heldout"))
    if not train:
        raise ConfigError("data: no records to draw GRPO prompts from")
    max_prompt_len = prompt_width(train + held, cfg.data.max_len)
    policy = task.policy(start, cfg.sampling, max_prompt_len=max_prompt_len)
    reward_fn = plugin_reward_fn(
        rewards, cfg.rewards, context=task.reward_context(start), call=cfg.reward_call
    )
    run_dir = prepare_run_dir(cfg)
    step = GRPOStep(policy, train, reward_fn, cfg.grpo,
                    ref_model=start.reference if cfg.grpo.beta > 0 else None)  # fmt: skip
    key = jax.random.fold_in(jax.random.key(seed), HELDOUT_STREAM)
    before = heldout_reward(policy, reward_fn, start.model, held, key=key)
    result = train_loop(start.model, cfg, step, wrt=start.wrt or nnx.Param, name="grpo")
    after = heldout_reward(policy, reward_fn, start.model, held, key=key)
    metrics = {"step": result.step, **result.metrics, **{f"eval/{k}": v for k, v in after.items()}}
    path = save_for_task(task, start, run_dir, trained_by="grpo", metrics=metrics)
    return GRPORunResult(
        history=result.history,
        heldout_before=before,
        heldout_after=after,
        checkpoint=path,
        run_dir=run_dir,
        seconds=result.seconds,
    )
