"""What every run config over a task's policy shares (`train grpo`, `train ppo`): the
task, its model and records, how rollouts are sampled, the optimizer and checkpoint
defaults of on-policy RL, and the plugin rewards with their call limits.

Pydantic only, without JAX (`config show` and `--help` read it cheaply). A trainer adds
its algorithm's section (`[grpo]`, `[ppo]`) and its `[train]` defaults."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from studio_align.config import Strict
from studio_align.rewards import RewardCallConfig
from studio_align.training.run_config import (
    CheckpointConfig,
    ModelSection,
    OptimConfig,
    RecordsSection,
    TrainRunConfig,
)


class SamplingSection(Strict):
    """`[sampling]`: how rollouts are drawn (temperature 1 keeps rollouts on-policy)."""

    temperature: float = Field(default=1.0, gt=0)
    max_new_tokens: int | None = Field(default=None, ge=1)  # default: the task's own limit
    # continuous batching: decode this many rows at a time, a row that ends taking the
    # next sample at once (`generation/continuous.py`); 0: every row of the rollout at once
    slots: int = Field(default=0, ge=0)


class PolicyRunConfig(TrainRunConfig):
    """The sections of an RL run over a task's policy, with on-policy RL's defaults
    (constant lr 1e-5, a checkpoint every 10 steps, the router's two rewards)."""

    task: str = "router"
    run_dir: Path | None = Path("runs/run")
    model: ModelSection = Field(default_factory=ModelSection)
    data: RecordsSection = Field(default_factory=RecordsSection)
    optim: OptimConfig = Field(
        default_factory=lambda: OptimConfig.model_validate(
            {"learning_rate": 1e-5, "decay": "constant"}
        )
    )
    sampling: SamplingSection = Field(default_factory=SamplingSection)
    checkpoint: CheckpointConfig = Field(
        default_factory=lambda: CheckpointConfig.model_validate({"every": 10})
    )
    # plugin reward name -> weight; every reward named here must be registered
    rewards: dict[str, float] = Field(
        default_factory=lambda: {"intent_accuracy": 1.0, "plan_validity": 0.5}
    )
    reward_call: RewardCallConfig = Field(default_factory=RewardCallConfig)
