"""A router, or a router ensemble, as a distillation teacher (`tasks.Teacher`).

Routers trained from different seeds have different tokenizers, but every router's
completions live in the same small alphabet: one token per catalog step, then `<eos>`.
The teacher speaks that alphabet: each member scores the completion (given in the
*student's* ids, translated through the alphabet) in one forward pass, giving its
constrained, renormalised step distributions (`Router.step_logprobs`), and the result is
handed back over the student's ids of the alphabet (K = steps + 1 candidates).

An ensemble (`ensemble.py`) routes by the members' mean *plan* probability, so its
teacher is that mixture's token conditionals, exactly: at position t each member is
weighted by its posterior given the prefix, `w_m ∝ p_m(y_<t)`, and `p(a | y_<t) =
sum_m w_m p_m(a | y_<t)`. A single router (a member, or a larger router) is the M = 1
case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from studio_align.catalog import Catalog
from studio_align.errors import DataError
from studio_align.router.ensemble import RouterEnsemble, load_any_router
from studio_align.router.format import EOS, step_token

CHUNK = 64  # requests per scoring pass


def _alphabet_ids(tok: Any, alphabet: Sequence[str], whose: str) -> np.ndarray:
    ids = [tok.token_to_id(t) for t in alphabet]
    missing = [t for t, i in zip(alphabet, ids, strict=True) if i is None]
    if missing:
        raise DataError(f"{whose}: tokenizer lacks router token(s) {missing[:3]}")
    return np.asarray(ids, np.int32)


class RouterTeacher:
    """Token distributions of a router or an ensemble over the plan alphabet (module doc)."""

    def __init__(self, path: str | Path, student_tokenizer: Any, catalog: Catalog) -> None:
        loaded = load_any_router(path)
        self.members = loaded.members if isinstance(loaded, RouterEnsemble) else [loaded]
        if tuple(self.members[0].catalog.names) != tuple(catalog.names):
            raise DataError(f"teacher {path}: routes over another catalog than the student")
        self.alphabet = [step_token(s) for s in catalog.names] + [EOS]
        self.student_ids = _alphabet_ids(student_tokenizer, self.alphabet, "student")
        self.member_ids = [
            _alphabet_ids(m.tokenizer, self.alphabet, f"teacher {path}") for m in self.members
        ]
        self._to_alpha = {int(t): a for a, t in enumerate(self.student_ids)}

    def _alpha(self, completion: Sequence[int]) -> list[int]:
        try:
            return [self._to_alpha[int(t)] for t in completion]
        except KeyError as e:
            raise DataError(
                f"distillation: completion token {e.args[0]} is not a plan token"
            ) from None

    def distributions(
        self, examples: Sequence[Mapping[str, Any]], completions: Sequence[Sequence[int]],
        width: int,
    ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        n, k = len(examples), len(self.alphabet)
        alpha = [self._alpha(c)[:width] for c in completions]
        requests = [e["requests"] for e in examples]
        stack = np.full((len(self.members), n, width, k), -1e30, np.float64)
        for j, (m, ids) in enumerate(zip(self.members, self.member_ids, strict=True)):
            prompts, inits = m.encode(requests)
            for s in range(0, n, CHUNK):
                rows = range(s, min(n, s + CHUNK))
                lps = m.step_logprobs(
                    [prompts[i] for i in rows], [ids[alpha[i]].tolist() for i in rows],
                    [inits[i] for i in rows],
                )  # fmt: skip
                for i, lp in zip(rows, lps, strict=True):
                    stack[j, i, : len(alpha[i])] = lp[:, ids]
        # each member's log-prob of the prefix before every position: its mixture weight
        picked = np.zeros((len(self.members), n, width))
        for i, a in enumerate(alpha):
            if a:
                picked[:, i, : len(a)] = stack[:, i, np.arange(len(a)), a]
        prefix = np.cumsum(picked, axis=2) - picked
        logw = prefix - np.logaddexp.reduce(prefix, axis=0, keepdims=True)
        mix = np.logaddexp.reduce(logw[..., None] + stack, axis=0)
        mix = np.maximum(mix, -1e30)
        ids_out = np.broadcast_to(self.student_ids, (n, width, k)).copy()
        return ids_out, mix.astype(np.float32)
