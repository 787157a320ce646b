"""Exemplar memory: the router learns from feedback without retraining.

Every accepted or re-routed route event is an exemplar: (the router's embedding of the
request, the creator's final plan, the creator, the attachment kinds). When a new
request arrives, its nearest exemplars can set the plan:

1. the creator's own exemplars: the nearest one with cosine similarity >= `creator_sim`
   gives its plan (this creator re-routed this kind of request before);
2. otherwise the population's: among the `k` nearest exemplars with similarity >=
   `population_sim`, a plan held by at least `min_votes` of them and by a strict
   majority gives its plan (creators at large agree on it).

Only exemplars with the same attachment kinds are compared, so a remembered plan is
always valid for the request (checked again by the caller).

Design choices:
- Bounded: at most `per_creator` exemplars per creator and `capacity` in all; the
  oldest goes first (a creator's taste drifts; recent feedback wins).
- Exact search over a dense, preallocated matrix: with thousands of 128-d exemplars one
  [batch, D] x [D, N] product serves a whole batch in well under a millisecond, so no
  approximate index is needed at this size; creators and attachment sets are integer
  codes, compared as arrays.
- Persisted beside the router checkpoint (`memory.npz` + `memory.json`) and reloaded
  by `Router.load`; the thresholds are saved with it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from studio_align.errors import CheckpointError

MEMORY_FILE = "memory.json"
MEMORY_ARRAYS = "memory.npz"


@dataclass(frozen=True)
class MemoryHit:
    plan: tuple[str, ...]
    similarity: float
    source: str  # "creator_memory" or "population_memory"


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float32)
    return x / max(float(np.linalg.norm(x)), 1e-8)


class ExemplarMemory:
    """A bounded nearest-neighbour index of feedback exemplars (see module docstring)."""

    def __init__(
        self,
        *,
        creator_sim: float = 0.9,
        population_sim: float = 0.95,
        k: int = 5,
        min_votes: int = 3,
        per_creator: int = 500,
        capacity: int = 20000,
    ) -> None:
        self.creator_sim = creator_sim
        self.population_sim = population_sim
        self.k = k
        self.min_votes = min_votes
        self.per_creator = per_creator
        self.capacity = capacity
        # rows [0, n) of preallocated arrays (grown by doubling): unit embeddings, and the
        # creator and attachment set as integer codes, so a lookup is one matrix product
        # and integer comparisons, never a Python loop over exemplars
        self._n = 0
        self._mat = np.zeros((0, 0), np.float32)
        self._creator_code = np.zeros(0, np.int32)
        self._att_code = np.zeros(0, np.int32)
        self._plans: list[tuple[str, ...]] = []
        self._creators: list[str] = []
        self._atts: list[str] = []
        self._codes: dict[str, int] = {}
        self._count: Counter[str] = Counter()

    def __len__(self) -> int:
        return self._n

    def settings(self) -> dict[str, Any]:
        keys = ("creator_sim", "population_sim", "k", "min_votes", "per_creator", "capacity")
        return {k: getattr(self, k) for k in keys}

    def _code(self, key: str) -> int:
        return self._codes.setdefault(key, len(self._codes))

    def add(
        self,
        embedding: np.ndarray,
        plan: Sequence[str],
        creator: str | None,
        attachments: Sequence[str],
    ) -> None:
        """Remember one outcome; evicts the creator's (then anyone's) oldest beyond the bounds."""
        c = creator or ""
        e = _unit(embedding).reshape(-1)
        if self._n == len(self._mat) or self._mat.shape[1] != e.shape[0]:
            if self._n and self._mat.shape[1] != e.shape[0]:
                raise ValueError(
                    f"embedding has {e.shape[0]} dims, the memory {self._mat.shape[1]}"
                )
            grow = max(64, 2 * len(self._mat))
            mat = np.zeros((grow, e.shape[0]), np.float32)
            if self._n:
                mat[: self._n] = self._mat[: self._n]
            self._mat = mat
            self._creator_code = np.resize(self._creator_code, grow)
            self._att_code = np.resize(self._att_code, grow)
        atts = ",".join(sorted(attachments))
        i = self._n
        self._mat[i] = e
        self._creator_code[i] = self._code("c:" + c)
        self._att_code[i] = self._code("a:" + atts)
        self._n += 1
        self._plans.append(tuple(plan))
        self._creators.append(c)
        self._atts.append(atts)
        self._count[c] += 1
        if c and self._count[c] > self.per_creator:
            self._drop(self._creators.index(c))
        if self._n > self.capacity:
            self._drop(0)

    def _drop(self, i: int) -> None:
        n = self._n
        for arr in (self._mat, self._creator_code, self._att_code):
            arr[i : n - 1] = arr[i + 1 : n]
        self._n -= 1
        self._count[self._creators[i]] -= 1
        for xs in (self._plans, self._creators, self._atts):
            del xs[i]

    def lookup(
        self, embedding: np.ndarray, creator: str | None, attachments: Sequence[str]
    ) -> MemoryHit | None:
        """The remembered plan for a request, or None when no exemplar is close enough."""
        return self.lookup_many(np.asarray(embedding)[None, :], [creator], [attachments])[0]

    def lookup_many(
        self,
        embeddings: np.ndarray,
        creators: Sequence[str | None],
        attachments: Sequence[Sequence[str]],
    ) -> list[MemoryHit | None]:
        """`lookup` for a batch: one [B, D] x [D, N] product for all requests."""
        if not self._n:
            return [None] * len(creators)
        emb = np.asarray(embeddings, np.float32)
        emb = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-8)
        sims_all = emb @ self._mat[: self._n].T  # [B, N]
        att_codes = self._att_code[: self._n]
        creator_codes = self._creator_code[: self._n]
        out: list[MemoryHit | None] = []
        for sims, creator, atts in zip(sims_all, creators, attachments, strict=True):
            code = self._codes.get("a:" + ",".join(sorted(atts)))
            if code is None:
                out.append(None)
                continue
            same = att_codes == code
            out.append(self._pick(sims, same, creator, creator_codes))
        return out

    def _pick(
        self, sims: np.ndarray, same: np.ndarray, creator: str | None, creator_codes: np.ndarray
    ) -> MemoryHit | None:
        ccode = self._codes.get("c:" + creator) if creator else None
        if ccode is not None:
            own = same & (creator_codes == ccode)
            if own.any():
                i = int(np.argmax(np.where(own, sims, -2.0)))
                if sims[i] >= self.creator_sim:
                    return MemoryHit(self._plans[i], float(sims[i]), "creator_memory")
        cand = np.where(same & (sims >= self.population_sim), sims, -2.0)
        n_cand = int((cand > -2.0).sum())
        if n_cand < self.min_votes:
            return None
        top = np.argsort(-cand)[: min(self.k, n_cand)]
        plan, votes = Counter(self._plans[int(i)] for i in top).most_common(1)[0]
        if votes < self.min_votes or votes * 2 <= len(top):
            return None
        sim = float(np.mean([sims[i] for i in top if self._plans[int(i)] == plan]))
        return MemoryHit(plan, sim, "population_memory")

    # -- persistence ---------------------------------------------------------------------------

    def save(self, directory: str | Path) -> Path:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        np.savez(d / MEMORY_ARRAYS, embeddings=self._mat[: self._n])
        meta = {
            "format": 1,
            "settings": self.settings(),
            "plans": [list(p) for p in self._plans],
            "creators": self._creators,
            "attachments": self._atts,
        }
        (d / MEMORY_FILE).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
        return d / MEMORY_FILE

    @classmethod
    def load(cls, directory: str | Path) -> ExemplarMemory | None:
        """The memory saved in a checkpoint directory, or None when it has none."""
        f = Path(directory) / MEMORY_FILE
        if not f.exists():
            return None
        try:
            meta = json.loads(f.read_text(encoding="utf-8"))
            emb = np.load(Path(directory) / MEMORY_ARRAYS)["embeddings"]
            mem = cls(**meta["settings"])
            n = len(meta["plans"])
            if len(emb) != n or len(meta["creators"]) != n or len(meta["attachments"]) != n:
                raise ValueError("arrays and metadata disagree on the number of exemplars")
            for e, plan, c, atts in zip(
                emb, meta["plans"], meta["creators"], meta["attachments"], strict=True
            ):
                mem.add(e, plan, c or None, [a for a in atts.split(",") if a])
            return mem
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, OSError) as e:
            raise CheckpointError(f"{f}: invalid exemplar memory ({e})") from e
