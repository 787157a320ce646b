"""Packing token sequences into fixed-shape arrays: SFT, paired (DPO family) and unpaired (KTO).

Everything is packed once into right-padded numpy arrays of one static length per
dataset (rounded up to a multiple of 8), so every training step has the same shapes and
the jitted step compiles once. Conventions follow `models/logprobs.py`: `*_tokens [N, L]`,
`*_attn [N, L]` marks real tokens, `*_loss [N, L]` marks the completion tokens whose
log-probs count.

Pairs pad chosen and rejected to the same length so one forward pass over their
concatenation scores both. KTO's KL reference point is estimated on mismatched pairs,
prompt i with the completion of sample i+1 (as in the KTO paper), packed here as `kl_*`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from studio_align.errors import DataError
from studio_align.training.pair_scoring import pair_layout

Arrays = dict[str, np.ndarray]


def _round_up(n: int, multiple: int = 8) -> int:
    return max(multiple, -(-n // multiple) * multiple)


def pack_completions(
    prompts: Sequence[Sequence[int]],
    completions: Sequence[Sequence[int]],
    *,
    pad_id: int,
    length: int | None = None,
    prefix: str = "",
) -> Arrays:
    """`{prefix}tokens/attn/loss [N, L]` for prompt+completion sequences."""
    if len(prompts) != len(completions):
        raise DataError(f"{len(prompts)} prompts but {len(completions)} completions")
    longest = max((len(p) + len(c) for p, c in zip(prompts, completions, strict=True)), default=1)
    length = _round_up(longest) if length is None else length
    n = len(prompts)
    tokens = np.full((n, length), pad_id, np.int32)
    attn = np.zeros((n, length), bool)
    loss = np.zeros((n, length), bool)
    for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
        if not c:
            raise DataError(f"sample {i}: empty completion")
        total = len(p) + len(c)
        if total > length:
            raise DataError(f"sample {i}: {total} tokens exceed the maximum length {length}")
        tokens[i, :total] = [*p, *c]
        attn[i, :total] = True
        loss[i, len(p) : total] = True
    return {f"{prefix}tokens": tokens, f"{prefix}attn": attn, f"{prefix}loss": loss}


def pack_pairs(
    prompts: Sequence[Sequence[int]],
    chosen: Sequence[Sequence[int]],
    rejected: Sequence[Sequence[int]],
    *,
    pad_id: int,
    length: int | None = None,
    layout: bool = True,
) -> Arrays:
    """`chosen_*` and `rejected_*` arrays padded to one common length, plus (`layout`) the
    arrays that let `pair_scoring.pair_logps` score them the fast way: one shared-prompt
    row per pair, or completion windows (`pair_scoring.pair_layout`)."""
    if not prompts:
        raise DataError("no preference pairs")
    if length is None:
        longest = max(
            len(p) + max(len(c), len(r)) for p, c, r in zip(prompts, chosen, rejected, strict=True)
        )
        length = _round_up(longest)
    arrays = {
        **pack_completions(prompts, chosen, pad_id=pad_id, length=length, prefix="chosen_"),
        **pack_completions(prompts, rejected, pad_id=pad_id, length=length, prefix="rejected_"),
    }
    return {**arrays, **pair_layout(arrays)} if layout else arrays


def pack_unpaired(
    prompts: Sequence[Sequence[int]],
    completions: Sequence[Sequence[int]],
    desirable: Sequence[bool],
    *,
    pad_id: int,
    length: int | None = None,
) -> Arrays:
    """KTO arrays: the samples, `desirable [N]`, and mismatched `kl_*` pairs (i, i+1)."""
    n = len(prompts)
    if n < 2:
        raise DataError("KTO needs at least 2 samples (the KL estimate mismatches pairs)")
    shifted = [completions[(i + 1) % n] for i in range(n)]
    if length is None:
        longest = max(
            len(p) + max(len(c), len(s))
            for p, c, s in zip(prompts, completions, shifted, strict=True)
        )
        length = _round_up(longest)
    return {
        **pack_completions(prompts, completions, pad_id=pad_id, length=length),
        **pack_completions(prompts, shifted, pad_id=pad_id, length=length, prefix="kl_"),
        "desirable": np.asarray(desirable, bool),
    }
