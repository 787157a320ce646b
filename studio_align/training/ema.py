"""An exponential moving average of the trained weights, kept in the optimizer state.

Why: the weights of the last step carry the noise of its last few batches; an average
over the recent steps is usually a flatter, better-calibrated point, and it is standard
for flow-matching and diffusion models. It costs one extra copy of the trainable weights
and one fused multiply-add per step.

Design choices:
- It is an optax transformation chained *last* (`[optim] ema_decay`), so the average is
  part of `opt_state`: it is sharded like the parameters (`optax.tree_map_params` finds
  it), saved in every checkpoint and restored on resume, with nothing new for the loop or
  the checkpointer to know. Bit-exact resume covers it for free.
- It passes the updates through unchanged: training itself is the same run with or
  without it.
- The decay warms up as `min(decay, 1 - 1 / t)` at update `t`: the plain mean of every
  step's weights until the horizon `1 / (1 - decay)` is reached, exponential after. So the
  random initial weights never enter the average, and `decay` alone sets the horizon (the
  common `(1 + t) / (10 + t)` warm-up would cap an 800-step run's horizon at about 90
  steps whatever `decay` says).
- The trainers export the average (`exported`), not the last step's weights, when it is
  configured; evaluation during training scores the average too, since that is what ships.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax


class EmaState(NamedTuple):
    steps: jax.Array  # updates averaged so far
    ema: optax.Params  # the average, shaped and sharded like the parameters


def ema_weights(decay: float) -> optax.GradientTransformation:
    """Updates unchanged; the state averages `params + updates` (the new weights)."""

    def init(params: optax.Params) -> EmaState:
        # a copy, never the parameter buffers themselves: both states are donated
        return EmaState(jnp.zeros([], jnp.int32), jax.tree.map(jnp.copy, params))

    def update(
        updates: optax.Updates, state: EmaState, params: optax.Params | None = None
    ) -> tuple[optax.Updates, EmaState]:
        if params is None:
            raise ValueError("ema_weights needs the parameters in tx.update")
        steps = state.steps + 1
        t = steps.astype(jnp.float32)
        d = jnp.minimum(jnp.float32(decay), 1.0 - 1.0 / t)

        def mix(e: jax.Array, p: jax.Array, u: jax.Array) -> jax.Array:
            new = p + u.astype(p.dtype)
            return (d * e + (1.0 - d) * new).astype(e.dtype)

        return updates, EmaState(steps, jax.tree.map(mix, state.ema, params, updates))

    return optax.GradientTransformation(init, update)


def ema_of(opt_state: Any) -> Any | None:
    """The averaged weights in `opt_state` (`ema_weights` chained last), or None."""
    if isinstance(opt_state, tuple) and opt_state and isinstance(opt_state[-1], EmaState):
        return opt_state[-1].ema
    return None


def exported(params: Any, opt_state: Any) -> Any:
    """The weights a trainer hands back: the average when there is one, else `params`."""
    ema = ema_of(opt_state)
    return params if ema is None else ema
