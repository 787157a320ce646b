"""Bradley-Terry pairwise loss for reward models: P(chosen > rejected) = sigmoid(s_c - s_r).

A pure function of scores; the reward-model trainer expands n-way selections into pairs
and produces the scores from whatever head it trains (shared trunk, per-creator heads).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array


def bradley_terry_loss(
    chosen_scores: Array,
    rejected_scores: Array,
    *,
    margin: Array | float = 0.0,
    label_smoothing: float = 0.0,
    weights: Array | None = None,
) -> tuple[Array, dict[str, Array]]:
    """Negative log-likelihood of the preferences under Bradley-Terry.

    Per pair: `-(1-ls) log sigmoid(d) - ls log sigmoid(-d)` with `d = s_c - s_r - margin`
    (margin as in Llama-2's reward model). `weights[B]` gives a weighted mean. Metrics:
    `accuracy` (s_c > s_r), mean `margin` (s_c - s_r), mean chosen/rejected scores.
    """
    diff = chosen_scores - rejected_scores
    d = diff - margin
    losses = -(1.0 - label_smoothing) * jax.nn.log_sigmoid(
        d
    ) - label_smoothing * jax.nn.log_sigmoid(-d)
    if weights is None:
        loss = jnp.mean(losses)
    else:
        loss = jnp.sum(losses * weights) / jnp.maximum(jnp.sum(weights), 1e-12)
    diff = jax.lax.stop_gradient(diff)
    metrics = {
        "accuracy": jnp.mean((diff > 0).astype(jnp.float32)),
        "margin": jnp.mean(diff),
        "scores/chosen": jnp.mean(jax.lax.stop_gradient(chosen_scores)),
        "scores/rejected": jnp.mean(jax.lax.stop_gradient(rejected_scores)),
    }
    return loss, metrics
