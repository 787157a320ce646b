"""Packed rows: a batch's short sequences laid end to end, each blind to the others.

Why: a batch of right-padded sequences does the work of its longest row in every row. On
the quickstart's routing data (longest 96 tokens, median 25) even a batch cut to its own
longest row (`TrimmedBatches`) is mostly padding. Packing the same batch into rows of the
run's padded length does the same maths on about half the tokens (a batch of 32 fills
10 rows of 96: 960 tokens against about 2,000), at a few row counts (8, 10 or 12 rows
there) instead of one compile per length bucket.

How the maths stays the same: every sequence gets its own segment id (`segments`, 1, 2,
... along a row; 0 is padding) and its own positions from 0, and the transformer's
`branches` mask lets a token attend only within its segment (there is no shared trunk:
padding, segment 0, is masked by `attn`). A sequence's first token carries no loss, as in
its own row, where position 0 is never a target. So per-token log-probs, and any
token-weighted mean of them, equal the unpacked batch's up to float rounding.

Design choices:
- The batch is packed as it comes (the same examples per step: training and exact resume
  are unchanged); first-fit decreasing by length, rows rounded up to a multiple of
  `rows_multiple` so a run compiles for a handful of row counts.
- Right-padded input (`attn` true on a prefix of each row), as `pack_completions` makes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from studio_align.models.transformer import positions_from_mask
from studio_align.training.batches import BatchSource, HostBatch


def _first_fit(lens: np.ndarray, length: int) -> tuple[np.ndarray, int]:
    """(row, offset) of each sequence and the number of rows, first-fit decreasing."""
    fill: list[int] = []
    where = np.zeros((len(lens), 2), np.int64)
    for i in np.argsort(-lens, kind="stable"):
        n = int(lens[i])
        if n == 0:
            continue
        row = next((r for r, used in enumerate(fill) if used + n <= length), len(fill))
        if row == len(fill):
            fill.append(0)
        where[i] = row, fill[row]
        fill[row] += n
    return where, len(fill)


def pack_rows(
    batch: HostBatch, length: int, *, rows_multiple: int = 2, groups: int = 1, prefix: str = ""
) -> dict[str, np.ndarray]:
    """`{prefix}tokens/attn/loss/positions/segments [groups * R, length]` holding `batch`.

    `batch` has right-padded `{prefix}tokens/attn/loss [B, T]`; each row's real tokens
    must fit `length`. The B rows are cut into `groups` consecutive micro-batches (the
    train loop's gradient accumulation), each packed into its own R rows: the fewest any
    group needs by first-fit decreasing, rounded up to `rows_multiple` (extra rows are
    padding and carry no loss)."""
    tokens, attn, loss = (batch[f"{prefix}{k}"] for k in ("tokens", "attn", "loss"))
    lens = attn.sum(1).astype(np.int64)
    if lens.size and int(lens.max()) > length:
        raise ValueError(f"a {int(lens.max())}-token sequence does not fit rows of {length}")
    if len(lens) % groups:
        raise ValueError(f"{len(lens)} rows do not split into {groups} micro-batches")
    size = len(lens) // groups
    fits = [_first_fit(lens[g * size : (g + 1) * size], length) for g in range(groups)]
    rows = max(1, -(-max(n for _, n in fits) // rows_multiple) * rows_multiple)
    shape = (groups * rows, length)
    out = {
        "tokens": np.zeros(shape, tokens.dtype),
        "attn": np.zeros(shape, bool),
        "loss": np.zeros(shape, bool),
        "positions": np.zeros(shape, np.int32),
        "segments": np.zeros(shape, np.int32),
    }
    segment = np.zeros(shape[0], np.int32)
    for g, (where, _) in enumerate(fits):
        for j, (row, off) in enumerate(where):
            i, r, n = g * size + j, g * rows + int(row), int(lens[g * size + j])
            if n == 0:
                continue
            segment[r] += 1
            span = slice(int(off), int(off) + n)
            out["tokens"][r, span] = tokens[i, :n]
            out["attn"][r, span] = True
            out["loss"][r, span] = loss[i, :n]
            out["loss"][r, int(off)] = False  # never a target in its own row either
            out["positions"][r, span] = np.arange(n)
            out["segments"][r, span] = segment[r]
    return {f"{prefix}{k}": v for k, v in out.items()}


class PackedBatches:
    """`source`'s batches packed into rows of `length` (`pack_rows`); same examples per step.

    Fields other than the packed prefix's pass through (a replay batch beside pairs)."""

    def __init__(
        self,
        source: BatchSource,
        length: int,
        *,
        rows_multiple: int = 2,
        groups: int = 1,
        prefix: str = "",
    ):
        if min(length, rows_multiple, groups) < 1:
            raise ValueError("length, rows_multiple and groups must be at least 1")
        self.source, self.length, self.groups = source, length, groups
        self.rows_multiple, self.prefix = rows_multiple, prefix
        self.steps_per_epoch = getattr(source, "steps_per_epoch", None)

    def __call__(self, step: int) -> HostBatch:
        batch = self.source(step)
        packed = pack_rows(batch, self.length, rows_multiple=self.rows_multiple,
                           groups=self.groups, prefix=self.prefix)  # fmt: skip
        names = {f"{self.prefix}{k}" for k in ("tokens", "attn", "loss")}
        return {**{k: v for k, v in batch.items() if k not in names}, **packed}


def batch_logits(model: Any, batch: Mapping[str, jax.Array], prefix: str = "") -> jax.Array:
    """Logits `[B, T, V]` of `{prefix}tokens`, packed rows (`segments` present) or plain
    right-padded ones."""
    tokens, attn = batch[f"{prefix}tokens"], batch[f"{prefix}attn"].astype(jnp.bool_)
    segments = batch.get(f"{prefix}segments")
    if segments is None:
        return model(tokens, positions_from_mask(attn), attn)
    return model.logits(model.hidden(tokens, batch[f"{prefix}positions"], attn, segments))
