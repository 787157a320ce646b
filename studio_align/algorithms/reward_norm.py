"""Running reward normaliser as an optax-style `(init, update)` pair.

Keeps an exact running mean and variance (Chan et al. parallel update, batch by batch)
and returns the batch standardised with the statistics *after* including it. Useful
where rewards are not normalised per group (e.g. a single-sample policy-gradient
baseline, or combining rewards of different scales before weighting).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

Array = jax.Array


class NormState(NamedTuple):
    n: Array
    mean: Array
    m2: Array


class RewardNormalizer(NamedTuple):
    init: Callable[[], NormState]
    update: Callable[[NormState, Array], tuple[Array, NormState]]


def running_normalizer(*, eps: float = 1e-6, center: bool = True) -> RewardNormalizer:
    """Standardise rewards by the running mean/std of every reward seen so far."""

    def init() -> NormState:
        z = jnp.zeros((), jnp.float32)
        return NormState(z, z, z)

    def update(state: NormState, rewards: Array) -> tuple[Array, NormState]:
        x = jnp.asarray(rewards, jnp.float32).reshape(-1)
        n_b = jnp.asarray(x.shape[0], jnp.float32)
        mean_b = jnp.mean(x)
        m2_b = jnp.sum((x - mean_b) ** 2)
        n = state.n + n_b
        delta = mean_b - state.mean
        mean = state.mean + delta * n_b / n
        m2 = state.m2 + m2_b + delta**2 * state.n * n_b / n
        new = NormState(n, mean, m2)
        std = jnp.sqrt(m2 / n)
        out = (x - mean) / (std + eps) if center else x / (std + eps)
        return out.reshape(jnp.shape(rewards)), new

    return RewardNormalizer(init, update)
