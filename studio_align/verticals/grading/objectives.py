"""The grading policy's losses for the shared `train_loop`, and its GRPO rollout policy.

- `bc_loss`: behaviour cloning, the Gaussian negative log-likelihood of the creator's
  `after` grade (summed over parameters, mean over the batch).
- `dpo_grade_loss`: DPO (`algorithms.dpo.dpo_loss`) over grades: a grade's "sequence
  log-prob" is the sum over parameters of the policy's Gaussian log-density, exactly as
  a completion's is the sum over its tokens; reference log-probs come precomputed in
  the batch (from the behaviour-cloned policy), as in the router's DPO.
- `ConditionedRolloutPolicy`: `tune.GradingRolloutPolicy` (the `training.policy.Policy`
  that GRPO samples) with the model's conditioning vectors (style + creator) in place of
  bare request embeddings.

All are pure `(loss, metrics)` functions of a model and a batch of arrays, so the one
jitted step of `training.loop.train_loop` (checkpoints, exact resume, metrics hook,
progress) trains them, and GRPO runs through `training.grpo.GRPOStep` on it: no second
copy of either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from studio_align.algorithms.dpo import dpo_loss
from studio_align.verticals.grading.policy import GradingPolicy
from studio_align.verticals.grading.rollout import GradingRolloutPolicy

Batch = Mapping[str, jax.Array]


def bc_loss(model: GradingPolicy, batch: Batch) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Gaussian NLL of `actions` given `feats` and `cond`; metric `mae` of the mean."""
    lp = model.log_probs(batch["feats"], batch["cond"], batch["actions"])
    mean, _ = model(batch["feats"], batch["cond"])
    mae = jnp.mean(jnp.abs(jax.lax.stop_gradient(mean) - batch["actions"]))
    return -jnp.mean(jnp.sum(lp, axis=-1)), {"mae": mae}


def grade_logps(
    model: GradingPolicy, feats: jax.Array, cond: jax.Array, actions: jax.Array
) -> jax.Array:
    """[B] log-density of whole grades (sum over parameters)."""
    return jnp.sum(model.log_probs(feats, cond, actions), axis=-1)


def make_dpo_grade_loss(*, beta: float, loss_type: str = "sigmoid") -> Any:
    """`loss(model, batch)` for DPO over grade pairs; options bound here, outside jit."""

    def loss(model: GradingPolicy, batch: Batch) -> tuple[jax.Array, dict[str, jax.Array]]:
        c = grade_logps(model, batch["feats"], batch["cond"], batch["chosen"])
        r = grade_logps(model, batch["feats"], batch["cond"], batch["rejected"])
        return dpo_loss(
            c, r, batch["ref_chosen"], batch["ref_rejected"], beta=beta, loss_type=loss_type
        )

    return loss


def reference_logps(
    model: GradingPolicy, feats: np.ndarray, cond: np.ndarray, actions: np.ndarray
) -> np.ndarray:
    """Grade log-densities under a frozen model, in chunks (DPO's reference column)."""
    out = []
    for i in range(0, len(feats), 4096):
        s = slice(i, i + 4096)
        out.append(
            np.asarray(
                grade_logps(
                    model, jnp.asarray(feats[s]), jnp.asarray(cond[s]), jnp.asarray(actions[s])
                )
            )
        )
    return np.concatenate(out).astype(np.float32)


class ConditionedRolloutPolicy(GradingRolloutPolicy):
    """GRPO rollouts over source thumbnails with precomputed features and conditioning."""

    def __init__(self, sources: np.ndarray, feats: np.ndarray, cond: np.ndarray) -> None:
        self.sources = np.asarray(sources, np.float32)
        self.feats = np.asarray(feats, np.float32)
        self.req = np.asarray(cond, np.float32)
