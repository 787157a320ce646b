"""Token-level finite-state constraints for decoding.

A constraint is a deterministic automaton over token ids: in state `s` the tokens with
`allowed[s, v]` may be emitted, and emitting `v` moves to `next_state[s, v]`. The
sampler applies it inside the jitted loop as a logits mask (disallowed tokens get
-inf) and advances one state per sample, so any grammar that compiles to a table — the
router's plan grammar, JSON schemas, a fixed vocabulary — costs one gather per step.

`init_state` is a scalar (every sample starts in the same state) or one state per
prompt. Tables are host numpy arrays until the sampler moves them to the device; a
table narrower than the model's vocabulary is padded with disallowed columns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FSMConstraint:
    """`allowed: bool[S, V]`, `next_state: int32[S, V]`, `init_state: int32[] or int32[B]`."""

    allowed: np.ndarray
    next_state: np.ndarray
    init_state: np.ndarray | int = 0

    def __post_init__(self) -> None:
        allowed = np.asarray(self.allowed, dtype=bool)
        nxt = np.asarray(self.next_state, dtype=np.int32)
        init = np.asarray(self.init_state, dtype=np.int32)
        if allowed.ndim != 2 or nxt.shape != allowed.shape:
            raise ValueError(
                f"FSMConstraint: allowed {allowed.shape} and next_state {nxt.shape} must both be [S, V]"
            )
        s = allowed.shape[0]
        if nxt.size and (nxt.min() < 0 or nxt.max() >= s):
            raise ValueError(f"FSMConstraint: next_state values must lie in [0, {s})")
        if init.ndim > 1 or (init.size and (init.min() < 0 or init.max() >= s)):
            raise ValueError(f"FSMConstraint: init_state must be a scalar or [B] in [0, {s})")
        object.__setattr__(self, "allowed", allowed)
        object.__setattr__(self, "next_state", nxt)
        object.__setattr__(self, "init_state", init)

    @property
    def num_states(self) -> int:
        return int(self.allowed.shape[0])

    @classmethod
    def unconstrained(cls, vocab_size: int) -> FSMConstraint:
        """One state that allows every token."""
        return cls(
            allowed=np.ones((1, vocab_size), bool),
            next_state=np.zeros((1, vocab_size), np.int32),
            init_state=0,
        )

    def tables(self, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
        """(allowed, next_state) widened to `vocab_size` columns (extra tokens disallowed)."""
        v = self.allowed.shape[1]
        if v > vocab_size:
            raise ValueError(f"FSMConstraint covers {v} tokens but the model has only {vocab_size}")
        if v == vocab_size:
            return self.allowed, self.next_state
        pad = vocab_size - v
        return (
            np.pad(self.allowed, ((0, 0), (0, pad)), constant_values=False),
            np.pad(self.next_state, ((0, 0), (0, pad)), constant_values=0),
        )

    def init_states(self, batch: int, padded_batch: int | None = None) -> np.ndarray:
        """Initial state per row: `[padded_batch]` (padding rows copy row 0)."""
        init = np.asarray(self.init_state, np.int32)
        rows = np.broadcast_to(init, (batch,)) if init.ndim == 0 else init
        if rows.shape[0] != batch:
            raise ValueError(
                f"FSMConstraint: init_state has {rows.shape[0]} rows, batch is {batch}"
            )
        out = np.full((padded_batch or batch,), rows[0] if batch else 0, np.int32)
        out[:batch] = rows
        return out

    def accepts_prefix(self, ids: list[int], init: int = 0) -> bool:
        """Whether `ids` can be emitted from state `init` (host-side check for tests/eval)."""
        s = init
        for i in ids:
            if not self.allowed[s, i]:
                return False
            s = int(self.next_state[s, i])
        return True
