"""Token-level distillation losses: forward KL, reverse KL and GKD's generalised JSD.

Inputs are log-probabilities over the same `K` candidates per position, `[B, T, K]`
(a whole vocabulary, or a teacher's top-K / support with the student gathered at those
ids), with a `[B, T]` mask of real positions; entries of probability 0 carry -inf (or
any very negative number) and contribute nothing.

Design choices:
- `generalised_jsd(beta)` is Agarwal et al.'s (GKD, 2024) `beta * KL(P || M) + (1 -
  beta) * KL(Q || M)` with teacher P, student Q and mixture `M = beta P + (1 - beta) Q`.
  It tends to 0 at both ends, so, as in TRL's GKDTrainer, `beta = 0` is defined as the
  forward KL(P || Q) and `beta = 1` as the reverse KL(Q || P); in between `JSD/beta`
  approaches the forward KL as beta -> 0 and `JSD/(1 - beta)` the reverse KL as beta -> 1.
- `beta` is a Python float chosen at the config edge (the endpoints are different
  functions), so nothing is switched inside a traced graph.
- Losses are token means over the mask; `metrics["weight"]` is the token count, so
  gradient accumulation combines micro-batches exactly.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

Array = jax.Array
Metrics = dict[str, Array]
NEG = -1e30


def _kl(lp: Array, lq: Array) -> Array:
    """Per-position KL(P || Q) from log-probs `[..., K]`; 0 * log 0 = 0. Log-probs are
    floored at -1e30 so a -inf never meets another in a subtraction (NaN gradients)."""
    lp, lq = jnp.maximum(lp, NEG), jnp.maximum(lq, NEG)
    p = jnp.exp(lp)
    return jnp.sum(jnp.where(p > 0, p * (lp - lq), 0.0), axis=-1)


def _reduce(per_pos: Array, mask: Array, name: str) -> tuple[Array, Metrics]:
    m = mask.astype(jnp.float32)
    n = jnp.sum(m)
    loss = jnp.sum(per_pos * m) / jnp.maximum(n, 1.0)
    return loss, {f"loss/{name}": jax.lax.stop_gradient(loss), "weight": n}


def forward_kl(student_logps: Array, teacher_logps: Array, mask: Array) -> tuple[Array, Metrics]:
    """KL(teacher || student): mode-covering (the student spreads over the teacher's support)."""
    return _reduce(_kl(jax.lax.stop_gradient(teacher_logps), student_logps), mask, "forward_kl")


def reverse_kl(student_logps: Array, teacher_logps: Array, mask: Array) -> tuple[Array, Metrics]:
    """KL(student || teacher): mode-seeking (the student picks the teacher's likely tokens)."""
    return _reduce(_kl(student_logps, jax.lax.stop_gradient(teacher_logps)), mask, "reverse_kl")


def generalised_jsd(
    student_logps: Array, teacher_logps: Array, mask: Array, *, beta: float = 0.5
) -> tuple[Array, Metrics]:
    """GKD's generalised Jensen-Shannon divergence (module docstring); beta in [0, 1]."""
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"generalised_jsd: beta must be in [0, 1], got {beta}")
    if beta == 0.0:
        return forward_kl(student_logps, teacher_logps, mask)
    if beta == 1.0:
        return reverse_kl(student_logps, teacher_logps, mask)
    lp = jax.lax.stop_gradient(teacher_logps)
    lq = student_logps
    lm = jnp.logaddexp(lp + jnp.log(beta), lq + jnp.log1p(-beta))
    per_pos = beta * _kl(lp, lm) + (1.0 - beta) * _kl(lq, lm)
    return _reduce(per_pos, mask, "jsd")


DistillLoss = Callable[[Array, Array, Array], tuple[Array, Metrics]]


def distill_loss(divergence: str, *, beta: float = 0.5) -> DistillLoss:
    """The loss function for a config's `divergence` (resolved before tracing)."""
    if divergence == "forward_kl":
        return forward_kl
    if divergence == "reverse_kl":
        return reverse_kl
    if divergence == "jsd":
        return lambda s, t, m: generalised_jsd(s, t, m, beta=beta)
    raise ValueError(f"unknown divergence {divergence!r}; expected forward_kl, reverse_kl or jsd")
