"""The grading policy's rollouts, for the very GRPO trainer the router uses.

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
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from studio_align.reward_models.color_stats import color_features
from studio_align.training.policy import Rollout
from studio_align.verticals.grading.policy import GradingPolicy, request_features
from studio_align.verticals.grading.renderer import N_PARAMS, render


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
