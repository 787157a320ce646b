"""Exact gradient accumulation inside one jitted step.

A step's batch arrives as `[accum, micro, ...]`; `lax.scan` walks the micro-batches,
keeping one micro-batch of activations alive at a time, and one optimizer update follows.

Exactness: a loss that is a mean over a varying number of units (tokens with a loss
mask, for instance) reports that number as `metrics["weight"]`. Micro-batch gradients and
metrics are then combined weighted by it, `sum_i w_i g_i / sum_i w_i`, which is exactly the
gradient of the mean over the whole batch. Without a `weight`, micro-batches count
equally, which is exact for per-example means over equal-sized micro-batches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

Batch = Mapping[str, jax.Array]
LossFn = Callable[[nnx.Module, Batch], tuple[jax.Array, Mapping[str, jax.Array]]]


def _model_value_and_grad(
    loss_fn: LossFn, wrt: Any, graphdef: Any, params: Any, rest: Any, batch: Batch
) -> tuple[jax.Array, dict[str, jax.Array], Any, Any]:
    """(loss, metrics incl. weight, grads wrt params, rest after the forward pass)."""

    def f(p: Any) -> tuple[jax.Array, tuple[dict[str, jax.Array], Any]]:
        model = nnx.merge(graphdef, p, rest)
        loss, metrics = loss_fn(model, batch)
        parts: tuple[Any, ...] = nnx.split(model, wrt, ...)
        new_rest = parts[2]  # e.g. advanced RNG counters
        return loss, (dict(metrics), new_rest)

    (loss, (metrics, new_rest)), grads = jax.value_and_grad(f, has_aux=True)(params)
    metrics = {k: jnp.asarray(v, jnp.float32) for k, v in metrics.items()}
    metrics["loss"] = jnp.asarray(loss, jnp.float32)
    metrics["weight"] = jax.lax.stop_gradient(metrics.get("weight", jnp.float32(1.0)))
    return loss, metrics, grads, new_rest


def accumulated_grads(
    loss_fn: LossFn, wrt: Any, graphdef: Any, params: Any, rest: Any, batch: Batch
) -> tuple[dict[str, jax.Array], Any, Any]:
    """Weighted mean of micro-batch gradients over the leading `accum` axis of `batch`.

    `wrt` is the nnx filter that selected `params` (the trainable variables) from the model;
    `rest` holds every other variable and is threaded through the micro-batches.

    Returns `(metrics, grads, rest)`; `metrics["loss"]` is the weighted mean loss and
    `metrics["weight"]` the total weight of the step.
    """
    accum = jax.tree.leaves(batch)[0].shape[0]
    if accum == 1:
        micro = jax.tree.map(lambda x: x[0], batch)
        _, metrics, grads, rest = _model_value_and_grad(loss_fn, wrt, graphdef, params, rest, micro)
        return metrics, grads, rest

    def body(carry: Any, micro: Batch) -> tuple[Any, None]:
        g_sum, m_sum, rest = carry
        _, metrics, grads, rest = _model_value_and_grad(loss_fn, wrt, graphdef, params, rest, micro)
        w = metrics["weight"]
        g_sum = jax.tree.map(lambda a, g: a + w * g, g_sum, grads)
        m_sum = {k: m_sum[k] + (v if k == "weight" else w * v) for k, v in metrics.items()}
        return (g_sum, m_sum, rest), None

    first = jax.tree.map(lambda x: x[0], batch)
    m_shape = jax.eval_shape(
        lambda: _model_value_and_grad(loss_fn, wrt, graphdef, params, rest, first)[1]
    )
    m0 = {k: jnp.zeros(v.shape, v.dtype) for k, v in m_shape.items()}
    g0 = jax.tree.map(jnp.zeros_like, params)
    (g_sum, m_sum, rest), _ = jax.lax.scan(body, (g0, m0, rest), batch)
    total = m_sum["weight"]
    grads = jax.tree.map(lambda g: g / total, g_sum)
    metrics = {k: (v if k == "weight" else v / total) for k, v in m_sum.items()}
    return metrics, grads, rest
