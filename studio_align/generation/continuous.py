"""Continuous batching: a fixed set of decode rows serving a longer queue of requests.

Why: the batch sampler decodes every row until the longest one ends, so a batch whose
lengths vary (a GRPO rollout where some samples stop after 3 tokens and some run to the
limit) spends most of its steps on rows that are already done. Here `slots` rows decode
together and a row that ends takes the next request from the queue at once, so the
decode steps track the total number of tokens, not the number of rows times the longest.

How (one jitted program, like the batch sampler):
- Every distinct prompt is prefilled once, in one batched forward pass, into a prompt
  cache. A request (prompt `q // group_size`) is admitted into a row by copying that
  prompt's keys and values into the row's KV slots: no model call, and the G samples of
  one prompt share one prefill (prefix sharing).
- The rows share one write cursor and use their slots as a ring of `prompt bucket + new
  tokens` slots. An admitted prompt takes the `p` slots just behind the cursor, every
  other slot of the row is emptied (`pos = -1`), and its last prompt token is fed again
  as the row's next input, so the model itself yields the logits of the first new token.
  Attention is causal by position (`Transformer.hidden_cached`), so a ring is fine.
- Each token is drawn with a key folded from (request, token index): a request's sample
  does not depend on which row served it or what shared its batch, and a greedy draw
  equals the batch sampler's token for token.
- `max_new_tokens` is per run; rows that end or reach it free themselves, and the loop
  stops when the queue is empty and every row is free.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from studio_align.generation.draw import DrawSettings, draw_token
from studio_align.models.transformer import Cache, positions_from_mask


def _admit(cache: Cache, admit: jax.Array, req: jax.Array, prompt: Cache, group_size: int,
           plen: jax.Array) -> Cache:  # fmt: skip
    """`cache` with each admitted row holding its request's prompt in the `p` slots behind
    the cursor (the prompt's last real token left empty: it is fed next) and nothing else."""
    p, size = prompt.pos.shape[1], cache.pos.shape[1]
    src = jnp.maximum(req, 0) // group_size  # the prompt each row would take
    slots = (cache.cursor - p + jnp.arange(p)) % size
    cols = jnp.arange(p)[None, :]
    ppos = jnp.where(cols < plen[src][:, None] - 1, prompt.pos[src], -1)  # [B, p]
    keep = ~admit[:, None]
    pos = (
        jnp.where(keep, cache.pos, -1).at[:, slots].set(jnp.where(keep, cache.pos[:, slots], ppos))
    )
    a4 = admit[:, None, None, None]
    ks = tuple(
        k.at[:, :, :, slots].set(jnp.where(a4, pk[src], k[:, :, :, slots]))
        for k, pk in zip(cache.k, prompt.k, strict=True)
    )
    vs = tuple(
        v.at[:, :, slots, :].set(jnp.where(a4, pv[src], v[:, :, slots, :]))
        for v, pv in zip(cache.v, prompt.v, strict=True)
    )
    return Cache(ks, vs, pos, cache.cursor)


@partial(
    jax.jit,
    static_argnames=("graphdef", "slots", "new_slots", "group_size", "cache_dtype", "eos_ids",
                     "pad_id", "mode"),
)  # fmt: skip
def generate_continuous(
    graphdef: Any,
    state: Any,
    tokens: jax.Array,
    lengths: jax.Array,
    rng: jax.Array,
    max_new: jax.Array,
    temperature: jax.Array,
    top_k: jax.Array,
    top_p: jax.Array,
    allowed: jax.Array,
    next_state: jax.Array,
    init_state: jax.Array,
    *,
    slots: int,
    new_slots: int,
    group_size: int,
    cache_dtype: str,
    eos_ids: tuple[int, ...],
    pad_id: int,
    mode: tuple[bool, bool, bool, bool],
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """`(tokens [R, new_slots], logps, lengths [R])` for the R = prompts x
    `group_size` requests (prompt-major, as the batch sampler), decoded `slots` rows at a
    time. `tokens [P, p]` are right-padded prompts of `lengths [P]`."""
    model = nnx.merge(graphdef, state)
    n_prompts, p = tokens.shape
    n_req, size = n_prompts * group_size, p + new_slots
    mask = jnp.arange(p)[None, :] < lengths[:, None]
    prompt = model.init_cache(n_prompts, p, jnp.dtype(cache_dtype))
    _, prompt = model.hidden_cached(tokens, positions_from_mask(mask), mask, prompt)
    eos = jnp.asarray(eos_ids, jnp.int32)
    settings = DrawSettings(temperature, top_k, top_p, allowed, eos[0], mode)

    def admit_free(free, nxt, req, tok, i, fsm, cache):
        rank = jnp.cumsum(free) - 1
        new = nxt + rank
        admit = free & (new < n_req)
        req = jnp.where(admit, new, jnp.where(free, -1, req))
        src = jnp.maximum(req, 0) // group_size
        last = jnp.take_along_axis(tokens[src], (lengths[src] - 1)[:, None], 1)[:, 0]
        tok = jnp.where(admit, last, tok)
        i = jnp.where(admit, 0, i)
        fsm = jnp.where(admit, init_state[jnp.maximum(req, 0)], fsm)
        cache = jax.lax.cond(
            jnp.any(admit), lambda c: _admit(c, admit, req, prompt, group_size, lengths),
            lambda c: c, cache,
        )  # fmt: skip
        return nxt + jnp.sum(admit), req, tok, i, fsm, cache

    cache = model.init_cache(slots, size, jnp.dtype(cache_dtype))
    cache = cache._replace(cursor=jnp.asarray(p, jnp.int32) % size)
    zeros = jnp.zeros((slots,), jnp.int32)
    nxt, req, tok, i, fsm, cache = admit_free(
        jnp.ones((slots,), bool), jnp.int32(0), zeros - 1, zeros, zeros, zeros, cache
    )
    out_tok = jnp.full((n_req + 1, new_slots), pad_id, jnp.int32)  # row n_req: idle rows
    out_lp = jnp.zeros((n_req + 1, new_slots), jnp.float32)
    out_len = jnp.zeros((n_req + 1,), jnp.int32)

    def cond(carry):
        return jnp.any(carry[1] >= 0)

    def body(carry):
        nxt, req, tok, i, fsm, cache, out_tok, out_lp, out_len = carry
        active = req >= 0
        src = jnp.maximum(req, 0) // group_size
        pos = (lengths[src] + i - 1)[:, None]
        logits, cache = model.forward_cached(tok[:, None], pos, active[:, None], cache)
        cache = cache._replace(cursor=cache.cursor % size)
        keys = jax.vmap(lambda r, j: jax.random.fold_in(jax.random.fold_in(rng, r), j))(
            jnp.maximum(req, 0), i
        )
        new_tok, logp = draw_token(logits[:, 0], fsm, keys, settings)
        row = jnp.where(active, req, n_req)
        out_tok = out_tok.at[row, i].set(jnp.where(active, new_tok, pad_id))
        out_lp = out_lp.at[row, i].set(jnp.where(active, logp, 0.0))
        out_len = out_len.at[row].add(active.astype(jnp.int32))
        fsm = jnp.where(active, next_state[fsm, new_tok], fsm)
        i = i + 1
        ended = active & (jnp.isin(new_tok, eos) | (i >= max_new))
        nxt, req, tok, i, fsm, cache = admit_free(
            ended, nxt, jnp.where(ended, -1, req), new_tok, i, fsm, cache
        )
        return nxt, req, tok, i, fsm, cache, out_tok, out_lp, out_len

    carry = (nxt, req, tok, i, fsm, cache, out_tok, out_lp, out_len)
    *_, out_tok, out_lp, out_len = jax.lax.while_loop(cond, body, carry)
    return out_tok[:n_req], out_lp[:n_req], out_len[:n_req]
