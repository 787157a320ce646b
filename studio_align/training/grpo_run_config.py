"""`studio-align train grpo`'s run config: pydantic only, no JAX, so `config show` and `--help` are cheap."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from studio_align.training.grpo_config import GRPOConfig
from studio_align.training.policy_run_config import PolicyRunConfig
from studio_align.training.policy_run_config import SamplingSection as SamplingSection
from studio_align.training.run_config import TrainConfig


class GRPOTrainConfig(TrainConfig):
    """`[train]` with GRPO's defaults: 100 steps, every step logged (its rewards)."""

    steps: int | None = Field(100, ge=1, le=10**9)
    log_every: int = Field(1, ge=1)


class GRPORunConfig(PolicyRunConfig):
    """The run config of `studio-align train grpo` (any task with a policy; plugin rewards)."""

    run_dir: Path | None = Path("runs/grpo")
    train: GRPOTrainConfig = Field(default_factory=GRPOTrainConfig)
    grpo: GRPOConfig = Field(default_factory=GRPOConfig)

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
