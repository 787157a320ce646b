"""`studio-align train ppo`'s run config: pydantic only, no JAX, so `config show` and `--help` are cheap."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from studio_align.config import Strict
from studio_align.training.policy_run_config import PolicyRunConfig
from studio_align.training.run_config import TrainConfig, TrainRunConfig


class PPOConfig(Strict):
    """`[ppo]`: rollouts, the critic, GAE and the clipped losses."""

    rollouts: int = Field(default=50, ge=1)  # rollouts (each followed by its updates)
    prompts_per_step: int = Field(default=8, ge=1)
    samples: int = Field(default=4, ge=1)  # completions per prompt
    epochs: int = Field(default=2, ge=1)  # passes over each rollout
    minibatches: int = Field(default=1, ge=1)  # optimizer updates per pass
    gamma: float = Field(default=1.0, ge=0, le=1)
    lam: float = Field(default=0.95, ge=0, le=1)
    epsilon: float = Field(default=0.2, gt=0)
    epsilon_high: float | None = Field(default=None, gt=0)  # None: epsilon
    value_clip: float = Field(default=0.2, gt=0)
    vf_coef: float = Field(default=0.1, ge=0)
    shared_critic: bool = True  # value head on the policy; false: a separate critic copy
    whiten_advantages: bool = True
    kl_coef: float = Field(default=0.05, ge=0)  # reward KL penalty (initial, if adaptive)
    kl_target: float | None = Field(default=None, gt=0)  # adaptive KL (Ziegler et al.)
    kl_horizon: int = Field(default=10_000, ge=1)
    seed: int = 0

    @property
    def rows(self) -> int:
        return self.prompts_per_step * self.samples

    @property
    def updates_per_rollout(self) -> int:
        return self.epochs * self.minibatches

    @model_validator(mode="after")
    def _minibatches_divide(self) -> PPOConfig:
        if self.rows % self.minibatches:
            raise ValueError(
                f"prompts_per_step * samples = {self.rows} rows do not split into "
                f"{self.minibatches} minibatches"
            )
        return self


class PPORunConfig(PolicyRunConfig):
    """The run config of `studio-align train ppo`. `[train]` keeps its logging options;
    its `steps`, `batch_size` and `seed` follow `[ppo]` (rollouts x updates, rows per
    minibatch, `ppo.seed`), and `checkpoint.every` counts rollouts."""

    run_dir: Path = Path("runs/ppo")
    ppo: PPOConfig = Field(default_factory=PPOConfig)

    def loop_config(self) -> TrainRunConfig:
        """What `train_loop` runs: one loop step per update, checkpoints on rollouts."""
        u = self.ppo.updates_per_rollout
        train = TrainConfig.model_validate(
            {**self.train.model_dump(), "steps": self.ppo.rollouts * u, "epochs": None,
             "batch_size": self.ppo.rows // self.ppo.minibatches, "grad_accum": 1,
             "seed": self.ppo.seed, "log_every": u}
        )  # fmt: skip
        ckpt = self.checkpoint.model_copy(update={"every": self.checkpoint.every * u})
        return TrainRunConfig(
            run_dir=self.run_dir, train=train, optim=self.optim, mesh=self.mesh,
            checkpoint=ckpt, distributed=self.distributed,
        )  # fmt: skip
