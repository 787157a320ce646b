"""Pointwise losses for unpaired ratings (thumbs up / down) on a reward model's scores.

Most creators on a platform rate one image; few compare four. A rating is a comparison
against an implicit reference: "better than what I would call neutral". With `z` the
score of that reference (a learned scalar of the reward model), both losses here read a
rating as a Bradley-Terry comparison of the image against `z`, so the pairwise and the
pointwise terms share one scale and can be summed.

- `pointwise_logistic_loss`: `-log sigmoid(s - z)` for up, `-log sigmoid(z - s)` for
  down (Bradley-Terry against the reference; a calibrated logistic model of "up").
- `kto_pointwise_loss`: KTO's prospect-theoretic value (Ethayarajh et al. 2024) applied
  to scores: `w_d (1 - sigmoid(beta (s - z)))` for up, `w_u (1 - sigmoid(beta (z - s)))`
  for down. Bounded per sample, so a few mislabelled ratings cannot dominate; the
  weights rebalance platforms where thumbs-up outnumber thumbs-down (the paper's
  `lambda_D`, `lambda_U`).

Both are pure functions of `[B]` arrays returning `(loss, metrics)`; `weights[B]` (e.g.
0 for padding) give a weighted mean. Which one a run uses is chosen at the config edge.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array


def _metrics(margin: Array, up: Array, w: Array) -> dict[str, Array]:
    m = jax.lax.stop_gradient(margin)
    right = jnp.where(up, m > 0, m < 0).astype(jnp.float32)
    total = jnp.maximum(jnp.sum(w), 1e-12)
    return {
        "accuracy": jnp.sum(right * w) / total,
        "margin/up": jnp.sum(jnp.where(up, m, 0.0) * w) / jnp.maximum(jnp.sum(w * up), 1e-12),
        "margin/down": jnp.sum(jnp.where(up, 0.0, m) * w) / jnp.maximum(jnp.sum(w * ~up), 1e-12),
    }


def _weighted_mean(losses: Array, w: Array) -> Array:
    return jnp.sum(losses * w) / jnp.maximum(jnp.sum(w), 1e-12)


def pointwise_logistic_loss(
    scores: Array,
    desirable: Array,
    reference: Array | float = 0.0,
    *,
    desirable_weight: float = 1.0,
    undesirable_weight: float = 1.0,
    weights: Array | None = None,
) -> tuple[Array, dict[str, Array]]:
    """Bradley-Terry of each rated image against the reference score `reference`."""
    up = desirable.astype(bool)
    margin = scores - reference
    losses = jnp.where(
        up,
        -desirable_weight * jax.nn.log_sigmoid(margin),
        -undesirable_weight * jax.nn.log_sigmoid(-margin),
    )
    w = jnp.ones_like(scores) if weights is None else weights.astype(scores.dtype)
    return _weighted_mean(losses, w), _metrics(margin, up, w)


def kto_pointwise_loss(
    scores: Array,
    desirable: Array,
    reference: Array | float = 0.0,
    *,
    beta: float = 1.0,
    desirable_weight: float = 1.0,
    undesirable_weight: float = 1.0,
    weights: Array | None = None,
) -> tuple[Array, dict[str, Array]]:
    """KTO's bounded value loss on scores relative to the reference score."""
    up = desirable.astype(bool)
    margin = scores - reference
    losses = jnp.where(
        up,
        desirable_weight * (1.0 - jax.nn.sigmoid(beta * margin)),
        undesirable_weight * (1.0 - jax.nn.sigmoid(-beta * margin)),
    )
    w = jnp.ones_like(scores) if weights is None else weights.astype(scores.dtype)
    return _weighted_mean(losses, w), _metrics(margin, up, w)


POINTWISE_LOSSES = {"logistic": pointwise_logistic_loss, "kto": kto_pointwise_loss}
