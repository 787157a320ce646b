"""One scoring pass over decoded plans: per-step constrained logits and the request embedding.

Calibration and memory need two things besides the decoded plan: the logits at each plan
step (to re-score the plan at a fitted temperature) and the request's hidden state at the
`<plan>` position (the router's own embedding of the request, used by the unfamiliarity
score and the exemplar memory). With the KV-cache sampler both come back from the
decoding pass itself (`from_decoding`: one model pass per batch, and no second program
to compile per shape); `analyse` gets them from one forward pass over prompt + plan, for
the `decode="full"` fallback and for scoring plans that were not decoded.

Design choices:
- The embedding is the final-norm hidden state at `<plan>`: the state from which the
  first step is predicted, so requests the router treats alike lie close together.
  It is L2-normalised for the memory (cosine similarity) and kept raw for the
  Mahalanobis distance.
- Step logits come back masked by the grammar (-inf where a token is not allowed), so
  any temperature applied to them keeps the constrained, renormalised semantics of the
  router's confidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx


@dataclass
class Analysis:
    """Per request: step logits [N, K, V] (masked), chosen ids [N, K] (-1 = none), the
    `<plan>` hidden state [N, D] and, where the decoding pass computed it, the pretrained
    encoder's sentence vector [N, D_s] (the exemplar memory's key)."""

    step_logits: np.ndarray
    actions: np.ndarray
    hidden: np.ndarray
    sentence: np.ndarray | None = None


_trace_count = 0  # traces of `_scan` (the server's /metrics shows it: 0 with the sampler)


@partial(jax.jit, static_argnums=0)
def _scan(graphdef: Any, state: Any, tokens: jax.Array, mask: jax.Array, pos: jax.Array):
    global _trace_count
    _trace_count += 1
    model = nnx.merge(graphdef, state)
    h = model.hidden(tokens, None, mask)  # [B, T, D]
    rows = jnp.arange(tokens.shape[0])[:, None]
    steps = h[rows, pos]  # [B, K, D]: states predicting each plan token
    return model.logits(steps).astype(jnp.float32), steps[:, 0, :]


def bucket_pow2(n: int, minimum: int) -> int:
    """The smallest `minimum * 2**k` that holds `n`: few shapes, so few compilations."""
    b = minimum
    while b < n:
        b *= 2
    return b


def analyse(
    router: Any,
    prompts: Sequence[Sequence[int]],
    completions: Sequence[Sequence[int]],
    inits: Sequence[int],
) -> Analysis:
    """Step logits, chosen ids and `<plan>` embeddings for decoded `completions`."""
    g = router.grammar
    k = router.max_steps + 1
    n = len(prompts)
    b = bucket_pow2(n, 1)
    t = bucket_pow2(max(len(p) + len(c) for p, c in zip(prompts, completions, strict=True)), 16)
    tokens = np.full((b, t), g.pad_id, np.int32)
    mask = np.zeros((b, t), bool)
    pos = np.zeros((b, k), np.int32)
    for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
        seq = list(p) + list(c)
        tokens[i, : len(seq)] = seq
        mask[i, : len(seq)] = True
        pos[i] = np.minimum(len(p) - 1 + np.arange(k), t - 1)
    logits, hidden = _scan(
        router._graphdef, router._state, jnp.asarray(tokens), jnp.asarray(mask), jnp.asarray(pos)
    )
    return from_decoding(router, completions, inits, np.asarray(logits)[:n], np.asarray(hidden)[:n])


def from_decoding(
    router: Any,
    completions: Sequence[Sequence[int]],
    inits: Sequence[int],
    step_logits: np.ndarray,
    hidden: np.ndarray,
    sentence: np.ndarray | None = None,
) -> Analysis:
    """The analysis of decoded `completions` from raw logits at each plan step [N, >=K, V]
    and `<plan>` states [N, D]: logits masked to what the grammar allowed in each step's
    state, 0 beyond a plan's end."""
    g = router.grammar
    k = router.max_steps + 1
    n = len(completions)
    actions = np.full((n, k), -1, np.int64)
    states = np.full((n, k), g.done_state, np.int64)
    for i, (c, s0) in enumerate(zip(completions, inits, strict=True)):
        s = s0
        for j, tok in enumerate(list(c)[:k]):
            actions[i, j] = tok
            states[i, j] = s
            s = int(g.next_state[s, tok])
    masked = np.where(g.allowed[states], step_logits[:, :k], -np.inf)  # [N, K, V]
    masked = np.where((actions >= 0)[..., None], masked, 0.0)
    return Analysis(masked, actions, hidden, sentence)
