"""One token per row: the maths of a draw, shared by the batch and the continuous samplers.

`draw_token` applies the constraint mask, draws (greedy, or temperature / top-k / top-p
by `sample_categorical`) and returns the drawn token's log-prob under the *policy*
(the raw logits renormalised over the allowed tokens: see `sampler.py`'s docstring).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class DrawSettings(NamedTuple):
    """Traced sampling values plus the static mode `(greedy, top_k on, top_p on,
    constrained)`; `allowed [S, V]` is the constraint's table, `eos` the id a row whose
    state allows nothing emits."""

    temperature: jax.Array
    top_k: jax.Array
    top_p: jax.Array
    allowed: jax.Array
    eos: jax.Array
    mode: tuple[bool, bool, bool, bool]


def draw_token(
    logits: jax.Array, fsm: jax.Array, key: jax.Array, s: DrawSettings
) -> tuple[jax.Array, jax.Array]:
    """`(token [B], log-prob [B])` from `logits [B, V]` in constraint states `fsm [B]`.

    `key` is one key for the batch or one key per row (`[B]`: a row's draw then does not
    depend on which rows share its batch, as in continuous batching)."""
    greedy, use_k, use_p, constrained = s.mode
    if constrained:
        ok = s.allowed[fsm]
        any_ok = jnp.any(ok, axis=-1)
        masked = jnp.where(ok, logits, -jnp.inf)
        base = jnp.where(any_ok[:, None], masked, 0.0)
    else:  # no [B, V] mask to gather and apply
        masked = base = logits
    if greedy:
        tok = jnp.argmax(masked, axis=-1)
    else:
        scaled = filter_logits(masked / s.temperature, s.top_k, s.top_p, use_k=use_k, use_p=use_p)
        tok = sample_categorical(key, scaled)
    tok = tok.astype(jnp.int32)
    # log-prob of the drawn token: logit - logsumexp, no [B, V] log-softmax array
    lse = jax.nn.logsumexp(base, axis=-1)
    logp = jnp.take_along_axis(base, tok[:, None], -1)[:, 0] - lse
    if constrained:
        tok = jnp.where(any_ok, tok, s.eos).astype(jnp.int32)
        logp = jnp.where(any_ok, logp, 0.0)
    return tok, logp


def filter_logits(
    logits: jax.Array, top_k: jax.Array, top_p: jax.Array, *, use_k: bool, use_p: bool
) -> jax.Array:
    """Keep the top-k tokens, then the smallest set whose mass reaches top_p (HF order)."""
    if not (use_k or use_p):
        return logits
    v = logits.shape[-1]
    srt = jnp.sort(logits, axis=-1)[..., ::-1]
    rank = jnp.arange(v)
    thresh = jnp.full((*logits.shape[:-1], 1), -jnp.inf, logits.dtype)
    if use_k:
        srt = jnp.where(rank < top_k, srt, -jnp.inf)
        thresh = srt[..., jnp.clip(top_k - 1, 0, v - 1)][..., None]
    if use_p:
        probs = jax.nn.softmax(srt, axis=-1)
        keep = (jnp.cumsum(probs, axis=-1) - probs) < top_p  # always keeps the first
        count = jnp.maximum(jnp.sum(keep, axis=-1, keepdims=True), 1)
        thresh = jnp.maximum(thresh, jnp.take_along_axis(srt, count - 1, axis=-1))
    return jnp.where(logits >= thresh, logits, -jnp.inf)


def sample_categorical(key: jax.Array, logits: jax.Array, block: int = 64) -> jax.Array:
    """One draw per row from softmax(logits) by two-level inverse-CDF sampling.

    Equivalent in distribution to `jax.random.categorical`, which draws a Gumbel number
    for every vocabulary entry (B*V random numbers per step: the dominant decode cost on
    CPU at batch 64). Here one uniform per row picks a block of `block` tokens by the
    cumulative block masses, then a token inside it: O(V) arithmetic, B random numbers.
    """
    b, v = logits.shape
    nb = -(-v // block)
    probs = jax.nn.softmax(logits.astype(jnp.float32), axis=-1)
    probs = jnp.pad(probs, ((0, 0), (0, nb * block - v))).reshape(b, nb, block)
    mass = probs.sum(-1)  # [B, nb]
    cum = jnp.cumsum(mass, axis=-1)
    if key.ndim:  # one key per row
        u = jax.vmap(lambda k: jax.random.uniform(k, (), jnp.float32))(key)
    else:
        u = jax.random.uniform(key, (b,), jnp.float32)
    u = u * cum[:, -1]
    bi = jnp.minimum(jnp.sum(cum <= u[:, None], axis=-1), nb - 1)
    inner = jnp.take_along_axis(probs, bi[:, None, None], axis=1)[:, 0]  # [B, block]
    u2 = u - (
        jnp.take_along_axis(cum, bi[:, None], -1)[:, 0]
        - jnp.take_along_axis(mass, bi[:, None], -1)[:, 0]
    )
    ci = jnp.minimum(jnp.sum(jnp.cumsum(inner, axis=-1) <= u2[:, None], axis=-1), block - 1)
    tok = bi * block + ci
    # Float rounding at a block edge could land on a zero-mass slot: fall back to the most
    # likely token of the chosen block (positive mass; a full-vocabulary argmax here cost
    # a [B, V] pass per decode step).
    ok = jnp.take_along_axis(inner, ci[:, None], -1)[:, 0] > 0
    return jnp.where(ok, tok, bi * block + jnp.argmax(inner, axis=-1)).astype(jnp.int32)
