"""`studio-align train grpo`'s run config: pydantic only, no JAX, so `config show` and `--help` are cheap."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from studio_align.config import Strict
from studio_align.rewards import RewardCallConfig
from studio_align.training.grpo_config import GRPOConfig
from studio_align.training.run_config import (
    CheckpointConfig,
    ModelSection,
    OptimConfig,
    RecordsSection,
    TrainConfig,
    TrainRunConfig,
)


class SamplingSection(Strict):
    """`[sampling]`: how rollouts are drawn (temperature 1 keeps rollouts on-policy)."""

    temperature: float = Field(default=1.0, gt=0)
    max_new_tokens: int | None = Field(default=None, ge=1)  # default: the task's own limit
    # continuous batching: decode this many rows at a time, a row that ends taking the
    # next sample at once (`generation/continuous.py`); 0: every row of the rollout at once
    slots: int = Field(default=0, ge=0)


class GRPOTrainConfig(TrainConfig):
    """`[train]` with GRPO's defaults: 100 steps, every step logged (its rewards)."""

    steps: int | None = Field(100, ge=1, le=10**9)
    log_every: int = Field(1, ge=1)


class GRPORunConfig(TrainRunConfig):
    """The run config of `studio-align train grpo` (any task with a policy; plugin rewards)."""

    task: str = "router"
    run_dir: Path | None = Path("runs/grpo")
    train: GRPOTrainConfig = Field(default_factory=GRPOTrainConfig)
    model: ModelSection = Field(default_factory=ModelSection)
    data: RecordsSection = Field(default_factory=RecordsSection)
    grpo: GRPOConfig = Field(default_factory=GRPOConfig)
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

    @model_validator(mode="after")
    def _batch_is_grpos(self) -> GRPORunConfig:
        default = TrainConfig()
        for key in ("batch_size", "grad_accum", "epochs"):
            if getattr(self.train, key) != getattr(default, key):  # a dumped default is fine
                raise ValueError(
                    f"train.{key} does not apply to GRPO: a step is grpo.prompts_per_step x "
                    "grpo.group_size completions, and train.steps says how many"
                )
        return self
