"""Exemplar memory: the router learns from feedback without retraining.

Every accepted or re-routed route event is an exemplar: (an embedding of the request,
the creator's final plan, the creator, the source that vouched for it, the attachment
kinds). When a new request arrives, its nearest exemplars can set the plan:

1. the creator's own exemplars: the nearest one with cosine similarity >= `creator_sim`
   gives its plan (this creator re-routed this kind of request before); among equally
   near exemplars the newest wins (the creator's latest correction);
2. otherwise the population's: among the `k` nearest *creators* (each represented by its
   nearest exemplar with similarity >= `population_sim`), a plan held by at least
   `min_votes` distinct creators, from at least `min_sources` distinct sources, and by a
   strict majority of those creators gives its plan. Votes count creators, never posts,
   so one creator posting a thousand times is one vote. The voters are the asker's own
   source's creators and the checkpoint's own exemplars (source `""`): a platform can
   name as many creators as it likes, so its votes may sway only its own creators'
   routes, never another platform's or an anonymous asker's (who sees the checkpoint's
   exemplars only). With `min_sources` >= 2 every source votes, and a plan needs that
   many distinct sources behind it, so no single platform can set one alone.

Only exemplars with the same attachment kinds are compared. The caller (`decide.py`)
checks a remembered plan against the catalog grammar and `max_steps` again and puts it
through the same calibration and abstention as the model's own plan.

Design choices:
- Bounded, and no source can crowd out another: at most `per_creator` exemplars per
  creator, at most `max_source_share * capacity` per source (a platform: see
  docs/serving.md; exemplars without a source, a checkpoint's own, are not capped by
  it), `capacity` in all. Beyond a bound the oldest exemplar of the creator
  (then of the source, then of the largest source) goes first.
- The embedding is whatever an `Embedder` gives (the router's `memory_keys`: the
  pretrained encoder's sentence vector, or the `<plan>` state of a model without one);
  the memory only needs rows of one width, so another encoder can replace it.
- Exact search over a dense, preallocated matrix: with thousands of 128-d exemplars one
  [batch, D] x [D, N] product serves a whole batch in well under a millisecond. Evicted
  rows are masked, not shifted, and compacted once half the rows are dead, so eviction is
  O(1) amortised even under a flood.
- Settings are validated (`MemorySettings`) wherever they come from; a bad value is one
  line naming the field. A checkpoint may carry a memory (`memory.npz` + `memory.json`,
  reloaded by `Router.load`); the server never writes one (it rebuilds its memory from
  the feedback log: `serving/learning.py`).
"""

from __future__ import annotations

import json
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from pydantic import ConfigDict, Field, ValidationError

from studio_align.config import Strict
from studio_align.errors import CheckpointError, ConfigError

MEMORY_FILE = "memory.json"
MEMORY_ARRAYS = "memory.npz"
TIE = 1e-5  # similarities this close are a tie: the newest exemplar wins


class Embedder(Protocol):
    """What the memory needs of an encoder: one unit-comparable row per request."""

    def embed(self, requests: Sequence[Any], *, batch_size: int = 64, pad_to: int = 1) -> Any: ...


class MemorySettings(Strict):
    """Thresholds and bounds of an `ExemplarMemory` (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    creator_sim: float = Field(0.9, gt=0.0, le=1.0)
    population_sim: float = Field(0.95, gt=0.0, le=1.0)
    k: int = Field(5, ge=1, le=1000)
    min_votes: int = Field(3, ge=1, le=1000)  # distinct creators that must agree
    min_sources: int = Field(1, ge=1, le=1000)  # distinct sources among them
    per_creator: int = Field(500, ge=1)
    capacity: int = Field(20000, ge=1, le=10_000_000)
    max_source_share: float = Field(0.5, gt=0.0, le=1.0)


def check_settings(values: Any, where: str) -> MemorySettings:
    """`values` as `MemorySettings`, or a `ConfigError` of one line naming the field."""
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: must be a table of memory settings")
    try:
        return MemorySettings(**values)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "settings"
        raise ConfigError(f"{where}.{field}: {err['msg']} (got {err.get('input')!r})") from None


@dataclass(frozen=True)
class MemoryHit:
    plan: tuple[str, ...]
    similarity: float  # in [0, 1]
    source: str  # "creator_memory" or "population_memory"


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float32)
    return x / max(float(np.linalg.norm(x)), 1e-8)


class ExemplarMemory:
    """A bounded nearest-neighbour index of feedback exemplars (see module docstring)."""

    def __init__(self, settings: MemorySettings | None = None, **values: Any) -> None:
        self.cfg = settings if settings is not None else check_settings(values, "memory")
        self.source_cap = max(1, int(self.cfg.max_source_share * self.cfg.capacity))
        self._n = 0  # rows used (alive or dead); row order is insertion order
        self._mat = np.zeros((0, 0), np.float32)
        self._alive = np.zeros(0, bool)
        self._creator_code = np.zeros(0, np.int32)
        self._source_code = np.zeros(0, np.int32)
        self._att_code = np.zeros(0, np.int32)
        self._plans: list[tuple[str, ...]] = []
        self._creators: list[str] = []
        self._sources: list[str] = []
        self._atts: list[str] = []
        self._codes: dict[str, int] = {}
        self._by_creator: dict[str, deque[int]] = {}
        self._by_source: dict[str, deque[int]] = {}
        self._live = 0

    def __len__(self) -> int:
        return self._live

    @property
    def dim(self) -> int:
        """The width of the stored embeddings (0 before the first)."""
        return int(self._mat.shape[1]) if self._n else 0

    def settings(self) -> dict[str, Any]:
        return self.cfg.model_dump()

    def counts(self) -> dict[str, Any]:
        """How many exemplars each source and how many creators hold (for reports)."""
        return {
            "exemplars": self._live,
            "creators": sum(1 for q in self._by_creator.values() if q),
            "sources": {s: len(q) for s, q in self._by_source.items() if q},
        }

    def _code(self, key: str) -> int:
        return self._codes.setdefault(key, len(self._codes))

    def _grow(self, dim: int) -> None:
        if self._n and self._mat.shape[1] != dim:
            raise ValueError(f"embedding has {dim} dims, the memory {self._mat.shape[1]}")
        if self._n < len(self._mat) and self._mat.shape[1] == dim:
            return
        if self._live * 2 <= self._n and self._n:
            self._compact()
            if self._n < len(self._mat):
                return
        size = max(64, 2 * len(self._mat))
        mat = np.zeros((size, dim), np.float32)
        if self._n:
            mat[: self._n] = self._mat[: self._n]
        self._mat = mat
        for name in ("_alive", "_creator_code", "_source_code", "_att_code"):
            old = getattr(self, name)
            new = np.zeros(size, old.dtype)
            new[: self._n] = old[: self._n]
            setattr(self, name, new)

    def _compact(self) -> None:
        keep = np.flatnonzero(self._alive[: self._n])
        m = len(keep)
        for name in ("_mat", "_alive", "_att_code"):
            arr = getattr(self, name)
            arr[:m] = arr[keep]
        self._alive[m : self._n] = False
        for name in ("_plans", "_creators", "_sources", "_atts"):
            old = getattr(self, name)
            setattr(self, name, [old[i] for i in keep])
        self._n = m
        # codes of evicted creators and sources go too, so a flood of new ids is bounded
        self._codes = {k: v for k, v in self._codes.items() if k.startswith("a:")}
        for i in range(m):
            self._creator_code[i] = self._code("c:" + self._creators[i])
            self._source_code[i] = self._code("s:" + self._sources[i])
        self._by_creator, self._by_source = {}, {}
        for i in range(m):
            self._by_creator.setdefault(self._creators[i], deque()).append(i)
            self._by_source.setdefault(self._sources[i], deque()).append(i)

    def add(
        self,
        embedding: np.ndarray,
        plan: Sequence[str],
        creator: str | None,
        attachments: Sequence[str],
        *,
        source: str = "",
    ) -> None:
        """Remember one outcome; evicts the oldest beyond the bounds (module docstring)."""
        c = creator or ""
        e = _unit(embedding).reshape(-1)
        if not np.isfinite(e).all():
            raise ValueError("embedding is not finite")
        self._grow(e.shape[0])
        atts = ",".join(sorted(attachments))
        i = self._n
        self._mat[i] = e
        self._alive[i] = True
        self._creator_code[i] = self._code("c:" + c)
        self._source_code[i] = self._code("s:" + source)
        self._att_code[i] = self._code("a:" + atts)
        self._n += 1
        self._live += 1
        self._plans.append(tuple(plan))
        self._creators.append(c)
        self._sources.append(source)
        self._atts.append(atts)
        self._by_creator.setdefault(c, deque()).append(i)
        self._by_source.setdefault(source, deque()).append(i)
        if c and len(self._by_creator[c]) > self.cfg.per_creator:
            self._drop(self._by_creator[c][0])
        if source and len(self._by_source[source]) > self.source_cap:
            self._drop(self._by_source[source][0])
        if self._live > self.cfg.capacity:
            largest = max(self._by_source.values(), key=len)
            self._drop(largest[0])

    def _drop(self, i: int) -> None:
        self._alive[i] = False
        self._live -= 1
        for q in (self._by_creator[self._creators[i]], self._by_source[self._sources[i]]):
            q.remove(i) if q[0] != i else q.popleft()

    def lookup(
        self,
        embedding: np.ndarray,
        creator: str | None,
        attachments: Sequence[str],
        *,
        source: str | None = None,
    ) -> MemoryHit | None:
        """The remembered plan for a request, or None when no exemplar is close enough.
        `source`: the asker's (its platform; None for an anonymous asker)."""
        emb = np.asarray(embedding)[None, :]
        return self.lookup_many(emb, [creator], [attachments], sources=[source])[0]

    def lookup_many(
        self,
        embeddings: np.ndarray,
        creators: Sequence[str | None],
        attachments: Sequence[Sequence[str]],
        *,
        sources: Sequence[str | None] | None = None,
    ) -> list[MemoryHit | None]:
        """`lookup` for a batch: one [B, D] x [D, N] product for all requests."""
        if not self._live:
            return [None] * len(creators)
        sources = list(sources) if sources is not None else [None] * len(creators)
        emb = np.asarray(embeddings, np.float32)
        emb = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-8)
        sims_all = emb @ self._mat[: self._n].T  # [B, N]
        att_codes = self._att_code[: self._n]
        creator_codes = self._creator_code[: self._n]
        source_codes = self._source_code[: self._n]
        alive = self._alive[: self._n]
        own_source = source_codes == self._codes.get("s:", -1)  # the checkpoint's exemplars
        out: list[MemoryHit | None] = []
        for sims, creator, atts, source in zip(sims_all, creators, attachments, sources,
                                               strict=True):  # fmt: skip
            code = self._codes.get("a:" + ",".join(sorted(atts)))
            if code is None or not np.isfinite(sims).all():
                out.append(None)
                continue
            same = alive & (att_codes == code)
            pool = same  # who may vote
            if self.cfg.min_sources < 2:  # the asker's source and the checkpoint's
                asker = self._codes.get("s:" + source, -1) if source else -1
                pool = same & (own_source | (source_codes == asker))
            out.append(self._pick(sims, same, pool, creator, creator_codes))
        return out

    def _pick(
        self,
        sims: np.ndarray,
        same: np.ndarray,
        pool: np.ndarray,
        creator: str | None,
        creator_codes: np.ndarray,
    ) -> MemoryHit | None:
        ccode = self._codes.get("c:" + creator) if creator else None
        if ccode is not None:
            own = np.flatnonzero(same & (creator_codes == ccode))
            if len(own):
                best = float(sims[own].max())
                if best >= self.cfg.creator_sim:
                    i = int(own[sims[own] >= best - TIE][-1])  # newest of the nearest
                    return MemoryHit(self._plans[i], min(best, 1.0), "creator_memory")
        cand = np.flatnonzero(pool & (sims >= self.cfg.population_sim))
        if len(cand) < self.cfg.min_votes:
            return None
        # each creator's nearest (newest on ties) exemplar, then the k nearest creators
        order = cand[np.lexsort((-cand, -sims[cand]))]
        voters: dict[str, int] = {}
        for i in order:
            c = self._creators[int(i)]
            if c and c not in voters:
                voters[c] = int(i)
                if len(voters) == self.cfg.k:
                    break
        tally = Counter(self._plans[i] for i in voters.values())
        if not tally:
            return None
        plan, votes = tally.most_common(1)[0]
        rows = [i for i in voters.values() if self._plans[i] == plan]
        sources = {self._sources[i] for i in rows}
        if votes < self.cfg.min_votes or votes * 2 <= len(voters):
            return None
        if len(sources) < self.cfg.min_sources:
            return None
        sim = float(np.mean([sims[i] for i in rows]))
        return MemoryHit(plan, min(sim, 1.0), "population_memory")

    def survivors(
        self, entries: Sequence[tuple[str | None, str]], settings: MemorySettings | None = None
    ) -> np.ndarray:
        """Which of this memory's exemplars (oldest first) and then of `entries` ((creator,
        source) per exemplar, in the order they would be added) the bounds of `settings`
        (default: this memory's) would leave if all were added. Eviction depends on
        creators and sources alone, so this replays it on them, without embeddings: a
        rebuild embeds only what will stay."""
        shadow = ExemplarMemory(settings if settings is not None else self.cfg)
        one = np.ones(1, np.float32)  # each shadow row's plan is its index, to read back
        rows = self._rows()
        for j, i in enumerate(rows):
            shadow.add(one, (str(j),), self._creators[i] or None, [], source=self._sources[i])
        for j, (creator, source) in enumerate(entries, start=len(rows)):
            shadow.add(one, (str(j),), creator, [], source=source)
        out = np.zeros(len(rows) + len(entries), bool)
        out[[int(shadow._plans[i][0]) for i in shadow._rows()]] = True
        return out

    def with_settings(
        self, settings: MemorySettings, keep: np.ndarray | None = None
    ) -> ExemplarMemory:
        """A new memory with `settings` holding these exemplars (oldest first); `keep`
        (one flag per exemplar, oldest first) holds only those flagged."""
        out = ExemplarMemory(settings)
        for j, i in enumerate(self._rows()):
            if keep is not None and not keep[j]:
                continue
            atts = [a for a in self._atts[i].split(",") if a]
            out.add(self._mat[i], self._plans[i], self._creators[i] or None, atts,
                    source=self._sources[i])  # fmt: skip
        return out

    # -- persistence ---------------------------------------------------------------------------

    def _rows(self) -> np.ndarray:
        return np.flatnonzero(self._alive[: self._n])

    def save(self, directory: str | Path) -> Path:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        rows = self._rows()
        np.savez(d / MEMORY_ARRAYS, embeddings=self._mat[rows])
        meta = {
            "format": 2,
            "settings": self.settings(),
            "plans": [list(self._plans[i]) for i in rows],
            "creators": [self._creators[i] for i in rows],
            "sources": [self._sources[i] for i in rows],
            "attachments": [self._atts[i] for i in rows],
        }
        (d / MEMORY_FILE).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
        return d / MEMORY_FILE

    @classmethod
    def load(cls, directory: str | Path, *, max_steps: int | None = None) -> ExemplarMemory | None:
        """The memory saved in a checkpoint directory, or None when it has none.

        Settings are validated and every plan must have 1 to `max_steps` steps; a bad
        file is a `CheckpointError` naming it and the field or row."""
        f = Path(directory) / MEMORY_FILE
        if not f.exists():
            return None
        try:
            meta = json.loads(f.read_text(encoding="utf-8"))
            if not isinstance(meta, dict):
                raise ValueError("not a JSON object")
            try:
                mem = cls(check_settings(meta.get("settings"), "settings"))
            except ConfigError as e:
                raise ValueError(str(e)) from None
            emb = np.load(Path(directory) / MEMORY_ARRAYS, allow_pickle=False)["embeddings"]
            n = len(meta["plans"])
            sources = meta.get("sources", [""] * n)
            if (
                not all(len(meta[k]) == n for k in ("creators", "attachments"))
                or len(sources) != n
                or len(emb) != n
            ):
                raise ValueError("arrays and metadata disagree on the number of exemplars")
            for row, (vec, plan, c, s, atts) in enumerate(
                zip(emb, meta["plans"], meta["creators"], sources, meta["attachments"], strict=True)
            ):
                if not isinstance(plan, list) or not all(isinstance(p, str) for p in plan):
                    raise ValueError(f"plans[{row}]: not a list of engine names")
                if not plan or (max_steps is not None and len(plan) > max_steps):
                    raise ValueError(
                        f"plans[{row}]: {len(plan)} steps, outside 1..{max_steps} (max_steps)"
                    )
                if not isinstance(c, str) or not isinstance(s, str) or not isinstance(atts, str):
                    raise ValueError(f"row {row}: creator, source and attachments must be text")
                mem.add(vec, plan, c or None, [a for a in atts.split(",") if a], source=s)
            return mem
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, OSError) as e:
            raise CheckpointError(f"{f}: invalid exemplar memory ({e})") from e
