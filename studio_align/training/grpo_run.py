"""The `train grpo` run: any task's prompts, its policy, plugin rewards, the shared trainer.

The task supplies the prompts (`Task.grpo_prompts`), the policy that samples and scores
them (`Task.policy`) and batch-wide reward context (`Task.reward_context`); rewards are
the plugin host's, chosen by name with weights in `[rewards]`.

Design choices:
- Held-out rewards are sampled with their own key (derived from the seed), never from the
  trainer's RNG stream, so evaluating before and after training does not change what a
  resumed run samples: a killed and resumed run is bitwise equal to an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np
from flax import nnx
from pydantic import Field

from studio_align.config import Strict
from studio_align.errors import ConfigError
from studio_align.models.sharding import MeshConfig
from studio_align.plugins import get_host
from studio_align.rewards import Reward, RewardCallConfig
from studio_align.tasks import StartingPoint
from studio_align.training.checkpoint import CheckpointConfig
from studio_align.training.distributed import DistributedConfig, maybe_initialize
from studio_align.training.grpo import GRPOConfig, GRPOTrainer, plugin_reward_fn
from studio_align.training.optim import OptimConfig
from studio_align.training.run import (
    ModelSection,
    RecordsSection,
    prepare_run_dir,
    read_split,
    resolve_task,
    save_for_task,
)

HELDOUT_STREAM = 7  # fold_in constant of the held-out sampling key


class SamplingSection(Strict):
    """`[sampling]`: how rollouts are drawn (temperature 1 keeps rollouts on-policy)."""

    temperature: float = Field(default=1.0, gt=0)
    max_new_tokens: int | None = Field(default=None, ge=1)  # default: the task's own limit
    # continuous batching: decode this many rows at a time, a row that ends taking the
    # next sample at once (`generation/continuous.py`); 0: every row of the rollout at once
    slots: int = Field(default=0, ge=0)


class GRPORunConfig(Strict):
    """The run config of `studio-align train grpo` (any task with a policy; plugin rewards)."""

    task: str = "router"
    run_dir: Path = Path("runs/grpo")
    model: ModelSection = Field(default_factory=ModelSection)
    data: RecordsSection = Field(default_factory=RecordsSection)
    grpo: GRPOConfig = Field(default_factory=GRPOConfig)
    optim: OptimConfig = Field(
        default_factory=lambda: OptimConfig.model_validate(
            {"learning_rate": 1e-5, "decay": "constant"}
        )
    )
    sampling: SamplingSection = Field(default_factory=SamplingSection)
    mesh: MeshConfig = Field(default_factory=lambda: MeshConfig.model_validate({}))
    checkpoint: CheckpointConfig = Field(
        default_factory=lambda: CheckpointConfig.model_validate({"every": 10})
    )
    distributed: DistributedConfig = Field(default_factory=DistributedConfig)
    # plugin reward name -> weight; every reward named here must be registered
    rewards: dict[str, float] = Field(
        default_factory=lambda: {"intent_accuracy": 1.0, "plan_validity": 0.5}
    )
    reward_call: RewardCallConfig = Field(default_factory=RewardCallConfig)


@dataclass
class GRPORunResult:
    history: list[dict[str, float]]
    heldout_before: dict[str, float]
    heldout_after: dict[str, float]
    checkpoint: Path
    run_dir: Path
    seconds: float


def heldout_reward(
    trainer: GRPOTrainer, records: Sequence[Any], *, group_size: int = 1, key: jax.Array
) -> dict[str, float]:
    """Mean rewards of fresh samples for held-out prompts under the current policy."""
    if not records:
        return {}
    inputs = [r["prompt"] for r in records]
    rollout = trainer.policy.sample(trainer._current_model(), inputs, group_size, key)
    per_sample = [r for r in records for _ in range(group_size)]
    total, metrics = trainer.reward_fn(per_sample, rollout)
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
    start = start or task.start(cfg.model, seed=cfg.grpo.seed, reference=cfg.grpo.beta > 0)
    train = task.grpo_prompts(start, read_split(task, cfg.data, "grpo", "train"))
    held = task.grpo_prompts(start, read_split(task, cfg.data, "grpo", "heldout"))
    if not train:
        raise ConfigError("data: no records to draw GRPO prompts from")
    longest = max(len(r["prompt"]) for r in train + held)
    max_prompt_len = cfg.data.max_len or -(-longest // 8) * 8
    policy = task.policy(start, cfg.sampling, max_prompt_len=max_prompt_len)
    reward_fn = plugin_reward_fn(
        rewards, cfg.rewards, context=task.reward_context(start), call=cfg.reward_call
    )
    run_dir = prepare_run_dir(cfg)
    trainer = GRPOTrainer(
        policy, start.model, train, reward_fn, cfg.grpo, cfg.optim,
        ref_model=start.reference if cfg.grpo.beta > 0 else None,
        run_dir=run_dir, wrt=start.wrt or nnx.Param, fire_hook=True, mesh=cfg.mesh,
        checkpoint=cfg.checkpoint,
    )  # fmt: skip
    key = jax.random.fold_in(jax.random.key(cfg.grpo.seed), HELDOUT_STREAM)
    before = heldout_reward(trainer, held, key=key)
    result = trainer.train()
    after = heldout_reward(trainer, held, key=key)
    last = result.history[-1] if result.history else {}
    metrics = {**last, **{f"eval/{k}": v for k, v in after.items()}}
    path = save_for_task(task, start, run_dir, trained_by="grpo", metrics=metrics)
    return GRPORunResult(
        history=result.history,
        heldout_before=before,
        heldout_after=after,
        checkpoint=path,
        run_dir=run_dir,
        seconds=result.seconds,
    )
