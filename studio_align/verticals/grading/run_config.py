"""`studio-align train grading --config RUN.toml`: the run config, one model per concern.

```toml
run_dir = "runs/grading"
logs = ["platform/logs.jsonl"]     # files or directories of *.jsonl (images relative to them)
algorithm = "grpo"                 # "grpo" | "dpo" | "bc" (behaviour cloning only)
seed = 0
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

[bc]   steps = 300, batch_size = 64, learning_rate = 3e-3
[grpo] steps = 60, prompts_per_step = 16, group_size = 8, beta = 0.02, learning_rate = 1e-3
[dpo]  steps = 200, batch_size = 64, beta = 0.05, learning_rate = 1e-3
[checkpoint] every = 50, keep = 2, resume = true
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from studio_align.config import Strict
from studio_align.models.sharding import MeshConfig
from studio_align.reward_models.train import FitSection, GateConfig, HeadConfig
from studio_align.rewards import RewardCallConfig
from studio_align.training.checkpoint import CheckpointConfig
from studio_align.training.distributed import DistributedConfig
from studio_align.training.grpo import GRPOConfig
from studio_align.training.optim import OptimConfig


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
    """Maps onto `training.grpo.GRPOConfig` (the shared GRPO step's own config); `steps`
    onto the loop's `train.steps`."""

    steps: int = Field(60, ge=0)
    prompts_per_step: int = Field(16, ge=1)
    group_size: int = Field(8, ge=2)
    mu: int = Field(2, ge=1)
    learning_rate: float = Field(1e-3, gt=0)
    epsilon: float = Field(0.2, gt=0)
    epsilon_high: float = Field(0.28, gt=0)
    beta: float = Field(0.02, ge=0)
    kl: Literal["k1", "k2", "k3"] = "k3"
    estimator: Literal["grpo", "dr_grpo", "rloo"] = "grpo"

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

    def optim(self) -> OptimConfig:
        return OptimConfig(name="adam", learning_rate=self.learning_rate, decay="constant")


class DPOSection(Strict):
    steps: int = Field(200, ge=0)
    batch_size: int = Field(64, ge=1)
    beta: float = Field(0.05, gt=0)
    loss_type: Literal["sigmoid", "robust", "hinge", "ipo"] = "sigmoid"
    learning_rate: float = Field(1e-3, gt=0)

    def optim(self) -> OptimConfig:
        return OptimConfig(name="adam", learning_rate=self.learning_rate, decay="constant")


class GradingRunConfig(Strict):
    """The run config of `studio-align train grading` (see the module docstring)."""

    run_dir: Path = Path("runs/grading")
    logs: list[str] = Field(min_length=1)
    quarantine: str | None = None
    algorithm: Literal["grpo", "dpo", "bc"] = "grpo"
    seed: int = 0
    heldout_fraction: float = Field(0.2, ge=0.0, le=1.0)
    strict: bool = True
    skip_bad_images: bool = True
    policy: PolicySection = Field(default_factory=PolicySection)
    reward: RewardSection = Field(default_factory=RewardSection)
    reward_call: RewardCallConfig = Field(default_factory=RewardCallConfig)  # GRPO's reward calls
    bc: BCSection = Field(default_factory=BCSection)
    grpo: GRPOSection = Field(default_factory=GRPOSection)
    dpo: DPOSection = Field(default_factory=DPOSection)
    checkpoint: CheckpointConfig = Field(default_factory=lambda: CheckpointConfig(every=50, keep=2))
    # the sections every run config shares: device mesh and multi-host start-up
    mesh: MeshConfig = Field(default_factory=MeshConfig)
    distributed: DistributedConfig = Field(default_factory=DistributedConfig)
