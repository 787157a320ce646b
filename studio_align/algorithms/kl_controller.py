"""KL-coefficient controllers as optax-style `(init, update)` pairs over NamedTuple state.

`adaptive_kl` is the proportional controller of Ziegler et al. (2019): the coefficient
grows when the measured KL is above `target` and shrinks when below, by at most
`clip` * n_steps / horizon per update. `fixed_kl` keeps it constant, so a trainer holds
one controller either way. States are pytrees of arrays, so `update` is jit-friendly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

Array = jax.Array


class KLState(NamedTuple):
    coef: Array


class KLController(NamedTuple):
    init: Callable[[], KLState]
    update: Callable[[KLState, Array, int], KLState]


def fixed_kl(coef: float) -> KLController:
    """A controller whose coefficient never changes."""

    def init() -> KLState:
        return KLState(jnp.asarray(coef, jnp.float32))

    def update(state: KLState, kl: Array, n_steps: int = 1) -> KLState:
        del kl, n_steps
        return state

    return KLController(init, update)


def adaptive_kl(
    init_coef: float, *, target: float, horizon: int, clip: float = 0.2
) -> KLController:
    """Proportional control of the KL coefficient towards `target` KL."""
    if target <= 0 or horizon <= 0:
        raise ValueError("adaptive_kl needs target > 0 and horizon > 0")

    def init() -> KLState:
        return KLState(jnp.asarray(init_coef, jnp.float32))

    def update(state: KLState, kl: Array, n_steps: int = 1) -> KLState:
        error = jnp.clip(kl / target - 1.0, -clip, clip)
        return KLState(state.coef * (1.0 + error * n_steps / horizon))

    return KLController(init, update)
