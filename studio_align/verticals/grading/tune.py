"""GRPO for the grading policy, through the very GRPO trainer the router uses.

`GradingRolloutPolicy` implements `studio_align.training.policy.Policy` for the
continuous grading policy, so `studio_align.training.grpo.GRPOStep` (group
rollouts, `algorithms.grpo.grpo_advantages`, the clipped `grpo_loss` with clip-higher
and a KL penalty to the behaviour-cloned reference, several updates per rollout) runs it
unchanged. The P grading parameters of one grade play the role of a completion's P
tokens: `logps` returns per-dimension Gaussian log-densities [N, P] with a mask of ones,
and the per-dimension Gaussian entropy.

A prompt record is `{"prompt": source index, "sources": image, "requests": text,
"creators": name}`; the trainer's `plugin_reward_fn` turns the non-prompt keys into
reward columns, and the rollout adds `images` (the rendered grades) and `actions`. The
rewards are the plugin host's (`aesthetic`, `identity`, `clip_critic`, or any other)
with config weights; `aesthetic_model` and `clip_encoder` travel as reward context.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from pydantic import Field

from studio_align.config import Strict
from studio_align.errors import ConfigError
from studio_align.reward_models.color_stats import color_features
from studio_align.training.checkpoint import CheckpointConfig
from studio_align.training.grpo import GRPOConfig, GRPOStep, plugin_reward_fn
from studio_align.training.loop import TrainConfig, TrainRunConfig, train_loop
from studio_align.training.optim import OptimConfig
from studio_align.training.policy import Rollout
from studio_align.verticals.grading.policy import GradingPolicy, request_features
from studio_align.verticals.grading.renderer import N_PARAMS, render


class GradingTuneConfig(Strict):
    """`[tune]`: GRPO over grades; algorithm knobs map onto `training.grpo.GRPOConfig`."""

    steps: int = Field(60, ge=1)
    batch_sources: int = Field(16, ge=1)
    group_size: int = Field(8, ge=2)
    updates_per_rollout: int = Field(2, ge=1)
    learning_rate: float = Field(1e-3, gt=0)
    epsilon: float = Field(0.2, gt=0)
    epsilon_high: float = Field(0.28, gt=0)
    beta: float = Field(0.02, ge=0)
    kl: str = "k3"
    estimator: str = "grpo"
    weights: dict[str, float] = Field(default_factory=lambda: {"aesthetic": 1.0, "identity": 1.0})
    seed: int = 0

    def grpo(self) -> GRPOConfig:
        return GRPOConfig(
            prompts_per_step=self.batch_sources,
            group_size=self.group_size,
            mu=self.updates_per_rollout,
            estimator=self.estimator,  # type: ignore[arg-type]
            epsilon=self.epsilon,
            epsilon_high=self.epsilon_high,
            beta=self.beta,
            kl=self.kl,  # type: ignore[arg-type]
            aggregation="sequence-mean-token-mean",
            dynamic_sampling=False,
        )

    def optim(self) -> OptimConfig:
        return OptimConfig.model_validate(
            {"name": "adam", "learning_rate": self.learning_rate, "decay": "constant"}
        )


class GradingRolloutPolicy:
    """The `Policy` protocol for a `GradingPolicy` over a fixed set of source images."""

    def __init__(self, sources: np.ndarray, requests: Sequence[str], request_dim: int) -> None:
        self.sources = np.asarray(sources, np.float32)
        self.feats = color_features(self.sources)
        self.req = request_features(list(requests), request_dim)

    def sample(
        self, model: Any, prompts: Sequence[Any], group_size: int, rng: jax.Array
    ) -> Rollout:
        idx = np.asarray(prompts, np.int64)
        actions, logps = _sample(
            model, rng, jnp.asarray(self.feats[idx]), jnp.asarray(self.req[idx]), group_size
        )
        actions = np.asarray(actions)
        rows = np.repeat(idx, group_size)
        outs = render(self.sources[rows], actions)
        n = len(rows)
        return Rollout(
            batch={"feats": self.feats[rows], "req": self.req[rows], "actions": actions},
            old_logps=np.asarray(logps),
            mask=np.ones((n, N_PARAMS), bool),
            lengths=np.full((n,), N_PARAMS),
            truncated=np.zeros((n,), bool),
            columns={"images": list(outs), "actions": list(actions)},
        )

    def logps(
        self, model: Any, batch: Mapping[str, jax.Array]
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        lp = model.log_probs(batch["feats"], batch["req"], batch["actions"])
        _, log_std = model(batch["feats"], batch["req"])
        entropy = 0.5 * math.log(2 * math.pi * math.e) + log_std
        return lp, jnp.ones_like(lp, dtype=bool), entropy


@functools.lru_cache(maxsize=8)
def _sampler(group_size: int) -> Any:
    """One jitted sampler per group size (compiled once, not per rollout)."""
    from flax import nnx

    return nnx.jit(lambda m, k, f, r: m.sample(k, f, r, group_size))


def _sample(model: GradingPolicy, key: jax.Array, f: jax.Array, r: jax.Array, g: int) -> Any:
    return _sampler(g)(model, key, f, r)


def tune_grading(
    policy: GradingPolicy,
    reference: GradingPolicy,
    sources: np.ndarray,
    requests: list[str],
    cfg: GradingTuneConfig,
    *,
    rewards: Mapping[str, Any],
    context: dict[str, Any] | None = None,
    creator: str | None = None,
    run_dir: str | None = None,
) -> list[dict[str, float]]:
    """Tune `policy` in place with GRPO on `sources` [N, S, S, 3]; returns per-step metrics.

    `rewards` maps names to `Reward`s (usually `host.rewards`); only those named in
    `cfg.weights` are used.
    """
    missing = sorted(set(cfg.weights) - set(rewards))
    if missing:
        raise ConfigError(
            f"tune.weights: unknown reward(s) {missing}; registered: {sorted(rewards)}"
        )
    use = {k: rewards[k] for k in cfg.weights}
    records = [
        {"prompt": i, "sources": sources[i], "requests": requests[i], "creators": creator}
        for i in range(len(sources))
    ]
    step = GRPOStep(
        GradingRolloutPolicy(sources, requests, policy.request_dim),
        records,
        plugin_reward_fn(use, cfg.weights, context=context or {}),
        cfg.grpo(),
        ref_model=reference if cfg.beta > 0 else None,
    )
    run = TrainRunConfig(
        run_dir=None if run_dir is None else Path(run_dir),
        train=TrainConfig(steps=cfg.steps, seed=cfg.seed, log_every=1, progress=False,
                          metrics_hook=False),
        optim=cfg.optim(),
        checkpoint=CheckpointConfig(enabled=False),
    )  # fmt: skip
    return train_loop(policy, run, step, name="grpo").history
