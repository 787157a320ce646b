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
- Exact search over a dense matrix: with thousands of 128-d exemplars one matrix-vector
  product is well under a millisecond, so no approximate index is needed at this size.
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
        self._emb: list[np.ndarray] = []
        self._plans: list[tuple[str, ...]] = []
        self._creators: list[str] = []
        self._atts: list[str] = []
        self._count: Counter[str] = Counter()
        self._matrix: np.ndarray | None = None  # cached stacks, rebuilt after a change
        self._att_arr: np.ndarray = np.zeros(0, object)
        self._creator_arr: np.ndarray = np.zeros(0, object)

    def __len__(self) -> int:
        return len(self._plans)

    def settings(self) -> dict[str, Any]:
        keys = ("creator_sim", "population_sim", "k", "min_votes", "per_creator", "capacity")
        return {k: getattr(self, k) for k in keys}

    def add(
        self,
        embedding: np.ndarray,
        plan: Sequence[str],
        creator: str | None,
        attachments: Sequence[str],
    ) -> None:
        """Remember one outcome; evicts the creator's (then anyone's) oldest beyond the bounds."""
        c = creator or ""
        self._emb.append(_unit(embedding))
        self._plans.append(tuple(plan))
        self._creators.append(c)
        self._atts.append(",".join(sorted(attachments)))
        self._count[c] += 1
        if c and self._count[c] > self.per_creator:
            self._drop(self._creators.index(c))
        if len(self._plans) > self.capacity:
            self._drop(0)
        self._matrix = None

    def _drop(self, i: int) -> None:
        self._count[self._creators[i]] -= 1
        for xs in (self._emb, self._plans, self._creators, self._atts):
            del xs[i]  # type: ignore[attr-defined]

    def lookup(
        self, embedding: np.ndarray, creator: str | None, attachments: Sequence[str]
    ) -> MemoryHit | None:
        """The remembered plan for a request, or None when no exemplar is close enough."""
        if not self._plans:
            return None
        if self._matrix is None:
            self._matrix = np.stack(self._emb)
            self._att_arr = np.array(self._atts, object)
            self._creator_arr = np.array(self._creators, object)
        sims = self._matrix @ _unit(embedding)
        same = self._att_arr == ",".join(sorted(attachments))
        if creator:
            own = same & (self._creator_arr == creator)
            if own.any():
                i = int(np.argmax(np.where(own, sims, -2.0)))
                if sims[i] >= self.creator_sim:
                    return MemoryHit(self._plans[i], float(sims[i]), "creator_memory")
        cand = np.where(same & (sims >= self.population_sim), sims, -2.0)
        top = [int(i) for i in np.argsort(-cand)[: self.k] if cand[i] > -2.0]
        if len(top) < self.min_votes:
            return None
        plan, votes = Counter(self._plans[i] for i in top).most_common(1)[0]
        if votes < self.min_votes or votes * 2 <= len(top):
            return None
        sim = float(np.mean([sims[i] for i in top if self._plans[i] == plan]))
        return MemoryHit(plan, sim, "population_memory")

    # -- persistence ---------------------------------------------------------------------------

    def save(self, directory: str | Path) -> Path:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        emb = np.stack(self._emb) if self._emb else np.zeros((0, 0), np.float32)
        np.savez(d / MEMORY_ARRAYS, embeddings=emb)
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
            mem._emb = [np.asarray(e, np.float32) for e in emb]
            mem._plans = [tuple(p) for p in meta["plans"]]
            mem._creators = list(meta["creators"])
            mem._atts = list(meta["attachments"])
            mem._count = Counter(mem._creators)
            return mem
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, OSError) as e:
            raise CheckpointError(f"{f}: invalid exemplar memory ({e})") from e
