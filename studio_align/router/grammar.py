"""The catalog's plan grammar compiled into a token-level finite-state machine.

Constrained decoding needs, for every decoder state, the set of tokens that may come next
and the state each one leads to, as dense arrays the jitted decode loop can index
(`allowed[S, V]`, `next_state[S, V]`). For router plans the state that matters is small:

    (which modalities are available, as a bitmask over image/video/audio;
     how many steps have been emitted so far)

plus one terminal state reached by `<eos>`. Text is always available, so it is not in the
mask. From a live state a step token is allowed when the step's need meets what is
available (exactly `Catalog.allowed_next`) and the plan is shorter than `max_steps`;
`<eos>` is allowed after at least one step. The terminal state allows only `<pad>` and
stays put, so batched decoding keeps padding finished rows. The initial state of a row is
its request's attachment mask with zero steps.

States are numbered `mask * (max_steps + 1) + n_steps`, terminal last; unreachable
combinations are kept (a few dozen rows of bools cost nothing) so the numbering is
simple to reason about.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from studio_align.catalog import ATTACHMENT_KINDS, Catalog
from studio_align.generation.constraint import FSMConstraint
from studio_align.router.format import EOS, PAD, TokenizerLike, step_token

_BIT = {kind: 1 << i for i, kind in enumerate(ATTACHMENT_KINDS)}


def modality_mask(modalities: Iterable[str]) -> int:
    """Bitmask over the attachment kinds (text is implicit and ignored)."""
    return sum(_BIT[m] for m in set(modalities) if m in _BIT)


def _mask_modalities(mask: int) -> set[str]:
    return {"text", *(k for k, b in _BIT.items() if mask & b)}


@dataclass(frozen=True)
class PlanGrammar:
    """Dense FSM arrays for the plan grammar over a vocabulary of `vocab_size` tokens."""

    allowed: np.ndarray  # bool[S, V]
    next_state: np.ndarray  # int32[S, V]
    max_steps: int
    step_ids: tuple[int, ...]  # token id of each catalog step, catalog order
    eos_id: int
    pad_id: int

    @property
    def num_states(self) -> int:
        return int(self.allowed.shape[0])

    @property
    def done_state(self) -> int:
        return self.num_states - 1

    def state(self, mask: int, n_steps: int) -> int:
        return mask * (self.max_steps + 1) + n_steps

    def init_state(self, attachments: Iterable[str]) -> int:
        return self.state(modality_mask(attachments), 0)

    def init_states(self, attachment_lists: Sequence[Iterable[str]]) -> np.ndarray:
        return np.asarray([self.init_state(a) for a in attachment_lists], dtype=np.int32)

    def accepts(self, ids: Sequence[int], attachments: Iterable[str]) -> bool:
        """Whether the id sequence (ending in `<eos>`, optionally padded) is a full plan."""
        s = self.init_state(attachments)
        for i in ids:
            if not self.allowed[s, i]:
                return False
            s = int(self.next_state[s, i])
        return s == self.done_state

    def constraint(self, attachment_lists: Sequence[Iterable[str]]) -> Any:
        """The engine's `FSMConstraint` with one initial state per request."""

        return FSMConstraint(
            allowed=self.allowed,
            next_state=self.next_state,
            init_state=self.init_states(attachment_lists),
        )


def compile_grammar(
    catalog: Catalog, tok: TokenizerLike, *, vocab_size: int | None = None, max_steps: int = 3
) -> PlanGrammar:
    """Compile `catalog`'s plan grammar for the token ids of `tok` (see module docstring)."""
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    vocab = int(vocab_size if vocab_size is not None else tok.vocab_size)
    step_ids: list[int] = []
    for name in catalog.names:
        i = tok.token_to_id(step_token(name))
        if i is None or i >= vocab:
            raise ValueError(f"step token {step_token(name)!r} missing or outside vocab {vocab}")
        step_ids.append(int(i))
    eos_id, pad_id = tok.token_to_id(EOS), tok.token_to_id(PAD)
    if eos_id is None or pad_id is None:
        raise ValueError("tokenizer lacks <eos> or <pad>")

    n_masks = 1 << len(ATTACHMENT_KINDS)
    per_mask = max_steps + 1
    n_states = n_masks * per_mask + 1
    done = n_states - 1
    allowed = np.zeros((n_states, vocab), dtype=bool)
    # Disallowed transitions point at the terminal state: never taken, but always in range.
    next_state = np.full((n_states, vocab), done, dtype=np.int32)

    for mask in range(n_masks):
        have = _mask_modalities(mask)
        for n in range(per_mask):
            s = mask * per_mask + n
            if n < max_steps:
                for eng, tid in zip(catalog.engines, step_ids, strict=True):
                    if eng.needs & have:
                        made = mask | _BIT.get(eng.makes or "", 0)
                        allowed[s, tid] = True
                        next_state[s, tid] = made * per_mask + n + 1
            if n >= 1:
                allowed[s, eos_id] = True
                next_state[s, eos_id] = done
    allowed[done, pad_id] = True
    next_state[done, pad_id] = done
    return PlanGrammar(allowed, next_state, max_steps, tuple(step_ids), int(eos_id), int(pad_id))
