"""`studio-align train grading --config RUN.toml`: the run config, one model per concern.

```toml
run_dir = "runs/grading"
logs = ["platform/logs.jsonl"]     # files or directories of *.jsonl (images relative to them)
algorithm = "grpo"                 # "grpo" | "dpo" | "bc" (behaviour cloning only)
heldout_fraction = 0.2             # by (creator, session), never by line
strict = true                      # false: skip (and count) grades with unknown parameters
skip_bad_images = true             # false: an unreadable image stops the run, naming it

[policy]
thumbnail = 64                     # the grade is predicted on a thumbnail of this size
hidden = 64
min_creator_events = 2             # fewer training events: served by the population slot

[reward]
model = ""                         # a `train reward` output dir; empty: trained inline
weights = { aesthetic = 1.0, identity = 0.5 }   # GRPO's plugin rewards and weights
ratings_weight = 1.0               # inline reward model: weight of the rating (KTO) term

[reward_call]
timeout_s = 60.0                   # one reward call longer than this stops the run, naming it
per_reward = { aesthetic = 120.0 } # a reward's own limit (default: none)

[train]                            # the tuned stage (`algorithm`: grpo or dpo) and the run
steps = 60                         # default: 60 for GRPO, 200 for DPO; 0 skips the stage
batch_size = 64                    # DPO's pairs per step (GRPO's: prompts_per_step x group_size)
seed = 0                           # the whole run's: split, model, batches, rollouts
log_every = 10                     # BC and DPO (GRPO logs every step: its reward curve)

[optim]                            # the tuned stage's optimizer
name = "adam", learning_rate = 1e-3, decay = "constant"

[bc]   steps = 300, batch_size = 64, learning_rate = 3e-3   # the warm start, its own optimizer
[grpo] prompts_per_step = 16, group_size = 8, beta = 0.02
[dpo]  beta = 0.05
[checkpoint] every = 50, keep = 2, resume = true
```

`[train]`, `[optim]`, `[checkpoint]`, `[mesh]` and `[distributed]` are the sections every
run config shares (`training.run_config.TrainRunConfig`); the keys that moved there (the
top-level `seed`, `[grpo]`/`[dpo]` `steps` and `learning_rate`, `[dpo] batch_size`) are
refused with one line naming their new place.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from studio_align.config import Strict, refuse_moved
from studio_align.reward_models.config import FitSection, GateConfig, HeadConfig
from studio_align.rewards import RewardCallConfig
from studio_align.training.grpo_config import GRPOConfig
from studio_align.training.run_config import (
    CheckpointConfig,
    OptimConfig,
    TrainConfig,
    TrainRunConfig,
)


class PolicySection(Strict):
    thumbnail: int = Field(64, ge=16, le=512)
    hidden: int = Field(64, ge=4)
    init_log_std: float = -1.0
    min_creator_events: int = Field(2, ge=1)


class RewardSection(Strict):
    model: str = ""
    weights: dict[str, float] = Field(default_factory=lambda: {"aesthetic": 1.0, "identity": 0.5})
    ratings_weight: float = Field(1.0, ge=0)
    head: HeadConfig = Field(default_factory=lambda: HeadConfig(hidden=32))
    train: FitSection = Field(default_factory=lambda: FitSection(steps=300, weight_decay=1e-2))
    gate: GateConfig = Field(default_factory=GateConfig)


class BCSection(Strict):
    steps: int = Field(300, ge=0)
    batch_size: int = Field(64, ge=1)
    learning_rate: float = Field(3e-3, gt=0)
    weight_decay: float = Field(1e-4, ge=0)

    def optim(self) -> OptimConfig:
        return OptimConfig(
            name="adamw",
            learning_rate=self.learning_rate,
            weight_decay=self.weight_decay,
            decay="constant",
        )


class GRPOSection(Strict):
    """Maps onto `training.grpo.GRPOConfig` (the shared GRPO step's own config); its steps
    are `train.steps`, its optimizer `[optim]`."""

    prompts_per_step: int = Field(16, ge=1)
    group_size: int = Field(8, ge=2)
    mu: int = Field(2, ge=1)
    epsilon: float = Field(0.2, gt=0)
    epsilon_high: float = Field(0.28, gt=0)
    beta: float = Field(0.02, ge=0)
    kl: Literal["k1", "k2", "k3"] = "k3"
    estimator: Literal["grpo", "dr_grpo", "rloo"] = "grpo"

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        return refuse_moved(data, {"steps": "train.steps", "learning_rate": "optim.learning_rate"})

    def grpo(self) -> GRPOConfig:
        return GRPOConfig(
            prompts_per_step=self.prompts_per_step,
            group_size=self.group_size,
            mu=self.mu,
            estimator=self.estimator,
            epsilon=self.epsilon,
            epsilon_high=self.epsilon_high,
            beta=self.beta,
            kl=self.kl,
            aggregation="sequence-mean-token-mean",
            dynamic_sampling=False,  # continuous rewards: groups practically never tie
        )


class DPOSection(Strict):
    """DPO over grade pairs; its steps and pairs per step are `[train]`'s, its optimizer
    `[optim]`."""

    beta: float = Field(0.05, gt=0)
    loss_type: Literal["sigmoid", "robust", "hinge", "ipo"] = "sigmoid"

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        return refuse_moved(
            data,
            {"steps": "train.steps", "batch_size": "train.batch_size",
             "learning_rate": "optim.learning_rate"},
        )  # fmt: skip


STAGE_STEPS = {"grpo": 60, "dpo": 200}  # the tuned stage's steps when `train.steps` is unset


class GradingTrainConfig(TrainConfig):
    """`[train]`: the tuned stage's steps (None: `STAGE_STEPS`; 0 skips it) and DPO's
    pairs per step; the run's seed; BC and DPO logging (GRPO logs every step)."""

    steps: int | None = Field(None, ge=0, le=10**9)
    batch_size: int = Field(64, ge=1, le=1 << 20)


def _tuned_optim() -> OptimConfig:
    return OptimConfig(name="adam", learning_rate=1e-3, decay="constant")


class GradingRunConfig(TrainRunConfig):
    """The run config of `studio-align train grading` (see the module docstring)."""

    run_dir: Path = Path("runs/grading")
    train: GradingTrainConfig = Field(default_factory=GradingTrainConfig)
    optim: OptimConfig = Field(default_factory=_tuned_optim)
    checkpoint: CheckpointConfig = Field(default_factory=lambda: CheckpointConfig(every=50, keep=2))
    logs: list[str] = Field(min_length=1)
    quarantine: str | None = None
    algorithm: Literal["grpo", "dpo", "bc"] = "grpo"
    heldout_fraction: float = Field(0.2, ge=0.0, le=1.0)
    strict: bool = True
    skip_bad_images: bool = True
    policy: PolicySection = Field(default_factory=PolicySection)
    reward: RewardSection = Field(default_factory=RewardSection)
    reward_call: RewardCallConfig = Field(default_factory=RewardCallConfig)  # GRPO's reward calls
    bc: BCSection = Field(default_factory=BCSection)
    grpo: GRPOSection = Field(default_factory=GRPOSection)
    dpo: DPOSection = Field(default_factory=DPOSection)

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        return refuse_moved(data, {"seed": "train.seed"})

    @model_validator(mode="after")
    def _loop_keys_apply(self) -> GradingRunConfig:
        default = TrainConfig()
        for key in ("epochs", "grad_accum"):
            if getattr(self.train, key) != getattr(default, key):
                raise ValueError(f"train.{key} does not apply to grading: set train.steps")
        return self

    @property
    def stage_steps(self) -> int:
        """Steps of the tuned stage (`algorithm` grpo or dpo; 0 for bc)."""
        if self.train.steps is not None:
            return self.train.steps
        return STAGE_STEPS.get(self.algorithm, 0)
