"""The pretrained encoder as shipped, never trained, and the logistic regressions fitted over
its vectors: the plan prior (`prior.py`) and the ask detector (`asks.py`) read requests
with it, whatever the router's own encoder became in fine-tuning."""

from __future__ import annotations

from functools import cache, partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from studio_align.models.encoders.use import UniversalSentenceEncoder, load_use


@cache
def frozen_encoder() -> UniversalSentenceEncoder:
    """One per process, shared by every prior and the ask detector."""
    return load_use()


def fit_logistic(
    x: np.ndarray, y: np.ndarray, n_classes: int, l2: float, steps: int = 200
) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression, L2 on the weights, full-batch L-BFGS: `(w, b)`."""
    params = (jnp.zeros((x.shape[1], n_classes)), jnp.zeros((n_classes,)))
    w, b = _lbfgs(params, jnp.asarray(x), jnp.asarray(y), jnp.float32(l2), steps)
    return np.asarray(w), np.asarray(b)


@partial(jax.jit, static_argnums=4)
def _lbfgs(params: Any, xs: jax.Array, ys: jax.Array, l2: jax.Array, steps: int) -> Any:
    """`steps` L-BFGS steps in one program (`l2` traced: one compile for every weight)."""

    def loss(params: tuple[jax.Array, jax.Array]) -> jax.Array:
        w, b = params
        nll = optax.softmax_cross_entropy_with_integer_labels(xs @ w + b, ys).mean()
        return nll + l2 * (w * w).sum()

    opt = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(loss)

    def step(carry: Any, _: Any) -> Any:
        params, state = carry
        value, grad = value_and_grad(params, state=state)
        updates, state = opt.update(grad, state, params, value=value, grad=grad, value_fn=loss)
        return (optax.apply_updates(params, updates), state), None

    (params, _), _ = jax.lax.scan(step, (params, opt.init(params)), None, length=steps)
    return params
