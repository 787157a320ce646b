"""Scoring both sides of preference pairs: the log-probs every DPO-family loss needs.

`pair_logps(model, batch)` returns the summed completion log-probs of chosen and rejected.
How much it computes depends on the layout arrays that `pair_layout(pairs)` adds to the
packed pairs (`packing.pack_pairs`), fastest first:

- **Shared prompt** (`shared_*`): chosen and rejected usually continue the same prompt,
  so one row `[prompt, chosen, rejected]` scores both (prefix sharing, as in Wang et al.
  2024, "Accelerating Direct Preference Optimization with Prefix Sharing"). The
  transformer's `branches` mask keeps rejected tokens blind to chosen ones and their
  positions restart after the prompt, so each log-prob is the one two separate rows give
  (up to float summation order), and the prompt's gradient sums both completions'
  contributions exactly as two rows would. With 48-token prompts and 16-token
  completions that is 80 token positions per pair instead of 128.
- **Completion windows** (`chosen_window`, `rejected_window`): two rows, but only the K
  positions that predict a completion token reach the vocabulary projection.
- Neither: full logits over every position (any model callable as `model(tokens, ...)`).

Layouts are built once in numpy at packing time, so the jitted step sees fixed shapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

from studio_align.models.logprobs import gather_logps, token_logps
from studio_align.models.transformer import positions_from_mask

PAIR_FIELDS = ("tokens", "attn", "loss")
SIDES = ("chosen", "rejected")


def _round_up(n: int, multiple: int = 8) -> int:
    return max(multiple, -(-n // multiple) * multiple)


def completion_windows(pairs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`chosen_window`, `rejected_window [N, K]`: per row, the K positions whose next token
    may be a completion token (the first one's predecessor onwards), K the longest span
    over both sides rounded up to 8. With them in the batch `pair_logps` projects onto
    the vocabulary only there (K of the L positions: 16 of 64 for 48-token prompts)."""
    spans = []
    for side in SIDES:
        loss = np.asarray(pairs[f"{side}_loss"], bool)[:, 1:]  # target t+1 predicted at t
        any_ = loss.any(axis=1)
        first = np.where(any_, loss.argmax(axis=1), 0)
        last = np.where(any_, loss.shape[1] - 1 - loss[:, ::-1].argmax(axis=1), 0)
        spans.append((first, last))
    width = loss.shape[1]
    k = max(int((last - first).max()) + 1 for first, last in spans)
    k = min(width, -(-k // 8) * 8)
    out = {}
    for side, (first, _) in zip(SIDES, spans, strict=True):
        start = np.minimum(first, width - k)  # the window stays inside the sequence
        out[f"{side}_window"] = (start[:, None] + np.arange(k)[None, :]).astype(np.int32)
    return out


def _spans(pairs: Mapping[str, np.ndarray], side: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(prompt length, sequence length) per row, or None unless every row is a right-padded
    prompt followed by one contiguous completion (what `pack_completions` writes)."""
    attn = np.asarray(pairs[f"{side}_attn"], bool)
    loss = np.asarray(pairs[f"{side}_loss"], bool)
    slots = np.arange(attn.shape[1])[None, :]
    total = attn.sum(axis=1)
    first = np.where(loss.any(axis=1), loss.argmax(axis=1), total)
    regular = (attn == (slots < total[:, None])).all(axis=1)
    regular &= (loss == ((slots >= first[:, None]) & (slots < total[:, None]))).all(axis=1)
    if not regular.all() or (first < 1).any() or (first >= total).any():
        return None
    return first, total


def shared_pair_layout(pairs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    """`shared_*` arrays scoring each pair in one `[prompt, chosen, rejected]` row, or None
    when some pair's sides do not share their prompt or the row would not be shorter
    than the two it replaces.

    `shared_tokens / shared_positions / shared_branches [N, T]` (branch 0 prompt, 1
    chosen, 2 rejected, -1 padding); `shared_pred / shared_target / shared_scored
    [N, 2K]`: for the K chosen then K rejected completion slots, the slot whose hidden
    state predicts the token, the token, and whether the slot is real. A rejected
    completion's first token is predicted from the prompt's last slot, not from the
    chosen tokens that precede it in the row.
    """
    c_tok, r_tok = (np.asarray(pairs[f"{s}_tokens"]) for s in SIDES)
    c_spans, r_spans = (_spans(pairs, s) for s in SIDES)
    if c_spans is None or r_spans is None:
        return None
    (prompt, c_end), (r_prompt, r_end) = c_spans, r_spans
    width = c_tok.shape[1]
    slots = np.arange(width)[None, :]
    same = ((c_tok == r_tok) | (slots >= prompt[:, None])).all(axis=1)
    if not (prompt == r_prompt).all() or not same.all():
        return None
    n_c, n_r = c_end - prompt, r_end - prompt
    t = _round_up(int((prompt + n_c + n_r).max()))
    if t >= 2 * width:
        return None
    s = np.arange(t)[None, :]
    p, c_stop = prompt[:, None], (prompt + n_c)[:, None]
    in_r = (s >= c_stop) & (s < c_stop + n_r[:, None])
    r_slot = np.clip(s - n_c[:, None], 0, width - 1)  # rejected token at slot s is r_tok[s - n_c]
    tokens = np.where(in_r, np.take_along_axis(r_tok, r_slot, axis=1), 0)
    tokens = np.where(
        s < c_stop, np.take_along_axis(c_tok, np.minimum(s, width - 1), axis=1), tokens
    )
    branches = np.select([s < p, s < c_stop, in_r], [0, 1, 2], -1)
    positions = np.where(in_r, s - n_c[:, None], np.where(branches >= 0, s, 0))
    k = _round_up(int(max(n_c.max(), n_r.max())))
    j = np.arange(k)[None, :]
    c_target, r_target = p + j, c_stop + j
    r_pred = np.where(j == 0, p - 1, r_target - 1)
    pred = np.concatenate([c_target - 1, r_pred], axis=1)
    target_slot = np.concatenate([c_target, r_target], axis=1)
    scored = np.concatenate([j < n_c[:, None], j < n_r[:, None]], axis=1)
    pred = np.where(scored, pred, 0)
    target = np.where(scored, np.take_along_axis(tokens, np.minimum(target_slot, t - 1), 1), 0)
    return {
        "shared_tokens": tokens.astype(np.int32),
        "shared_positions": positions.astype(np.int32),
        "shared_branches": branches.astype(np.int32),
        "shared_pred": pred.astype(np.int32),
        "shared_target": target.astype(np.int32),
        "shared_scored": scored,
    }


def pair_layout(pairs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The fastest layout the pairs allow: shared-prompt rows, else completion windows."""
    return shared_pair_layout(pairs) or completion_windows(pairs)


def carried_layout(pairs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The layout arrays `pairs` already carry (`pack_pairs` adds them), else `pair_layout`:
    scoring the same packed pairs again (every evaluation) does not rebuild them."""
    carried = {k: v for k, v in pairs.items() if k.startswith("shared_") or k.endswith("_window")}
    return carried or pair_layout(pairs)


def _shared_logps(model: Any, batch: Mapping[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
    branches = batch["shared_branches"]
    h = model.hidden(batch["shared_tokens"], batch["shared_positions"], branches >= 0, branches)
    h = jnp.take_along_axis(h, batch["shared_pred"][:, :, None], axis=1)
    lp = gather_logps(model.logits(h), batch["shared_target"])
    m = batch["shared_scored"].astype(lp.dtype)
    k = lp.shape[1] // 2
    sums = jnp.concatenate([jnp.sum(lp[:, :k] * m[:, :k], 1), jnp.sum(lp[:, k:] * m[:, k:], 1)])
    counts = jnp.concatenate([jnp.sum(m[:, :k], 1), jnp.sum(m[:, k:], 1)])
    return sums, counts


def _windowed_logps(
    model: Any, tokens: jax.Array, attn: jax.Array, loss: jax.Array, window: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """(sum, count) of completion log-probs, projecting onto the vocabulary at `window` only."""
    attn = attn.astype(jnp.bool_)
    h = model.hidden(tokens, positions_from_mask(attn), attn)
    h = jnp.take_along_axis(h, window[:, :, None], axis=1)
    targets = jnp.take_along_axis(tokens, window + 1, axis=1)
    m = jnp.take_along_axis(loss, window + 1, axis=1) & jnp.take_along_axis(
        attn, window + 1, axis=1
    )
    lp = gather_logps(model.logits(h), targets)
    m32 = m.astype(lp.dtype)
    return jnp.sum(lp * m32, axis=1), jnp.sum(m32, axis=1)


def pair_logps(model: Any, batch: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
    """Summed completion log-probs and completion lengths of chosen and rejected, `[B]` each.

    Uses the batch's `pair_layout` arrays when the model exposes `hidden` and `logits`
    (studio-align's transformer); the result is the same in every layout."""
    b = batch["chosen_tokens"].shape[0]
    fast = hasattr(model, "hidden") and hasattr(model, "logits")
    if fast and "shared_tokens" in batch:
        sums, counts = _shared_logps(model, batch)
    else:
        tokens = jnp.concatenate([batch["chosen_tokens"], batch["rejected_tokens"]])
        attn = jnp.concatenate([batch["chosen_attn"], batch["rejected_attn"]])
        full_loss = jnp.concatenate([batch["chosen_loss"], batch["rejected_loss"]])
        if fast and "chosen_window" in batch:
            window = jnp.concatenate([batch["chosen_window"], batch["rejected_window"]])
            sums, counts = _windowed_logps(model, tokens, attn, full_loss.astype(bool), window)
        else:
            lp = token_logps(cast(Any, model), tokens, attn)
            m = full_loss[:, 1:].astype(lp.dtype)
            sums, counts = jnp.sum(lp * m, axis=1), jnp.sum(m, axis=1)
    return {
        "chosen_logps": sums[:b],
        "rejected_logps": sums[b:],
        "chosen_len": counts[:b],
        "rejected_len": counts[b:],
    }
