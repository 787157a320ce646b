"""The exemplar memory alone: settings validated with the field named, plans checked at
load, confidences in [0, 1], newest wins ties, and a flood evicts in bounded time without
touching another source's exemplars."""

from __future__ import annotations

import json

import numpy as np
import pytest

from studio_align.errors import CheckpointError, ConfigError
from studio_align.router.memory import ExemplarMemory


def test_memory_settings_are_validated_with_the_field_named(tmp_path) -> None:
    for bad in ({"creator_sim": -1.0}, {"population_sim": float("nan")}, {"capacity": 0}):
        with pytest.raises(ConfigError, match=f"memory.{next(iter(bad))}"):
            ExemplarMemory(**bad)
    mem = ExemplarMemory()
    mem.add(np.ones(4, np.float32), ["audio.music"] * 16, "c1", [])
    mem.save(tmp_path)
    with pytest.raises(CheckpointError, match=r"plans\[0\]: 16 steps"):
        ExemplarMemory.load(tmp_path, max_steps=3)
    meta = json.loads((tmp_path / "memory.json").read_text())
    meta["settings"]["creator_sim"] = float("nan")
    (tmp_path / "memory.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"settings\.creator_sim"):
        ExemplarMemory.load(tmp_path, max_steps=3)


def test_memory_confidence_is_clipped_and_newest_wins_ties() -> None:
    mem = ExemplarMemory()
    e = np.full(128, 0.1, np.float32)
    mem.add(e, ["audio.music"], "c1", [])
    mem.add(e, ["audio.speech"], "c1", [])
    hit = mem.lookup(e * 3.0, "c1", [])
    assert hit is not None and hit.plan == ("audio.speech",) and 0.0 <= hit.similarity <= 1.0


def test_memory_flood_evicts_in_bounded_time_and_keeps_other_sources() -> None:
    mem = ExemplarMemory(capacity=1000, max_source_share=0.5)
    rng = np.random.default_rng(0)
    mem.add(np.ones(16, np.float32), ["audio.music"], "p:ana", [], source="p")
    for i in range(20_000):
        mem.add(rng.normal(size=16), ["audio.speech"], f"q:{i}", [], source="q")
    assert mem.counts()["sources"] == {"p": 1, "q": 500}
    hit = mem.lookup(np.ones(16, np.float32), "p:ana", [])
    assert hit is not None and hit.plan == ("audio.music",)
    # the ids the flood invented are forgotten with their exemplars (bounded bookkeeping)
    assert len(mem._codes) < 4 * 500


def test_population_votes_come_from_the_askers_source_and_the_checkpoint() -> None:
    e = np.ones(8, np.float32)
    mem = ExemplarMemory(min_votes=3)
    for i in range(5):  # one platform's invented creators
        mem.add(e, ["audio.speech"], f"q:sock{i}", [], source="q")
    hit = mem.lookup(e, "q:new", [], source="q")
    assert hit is not None and hit.plan == ("audio.speech",)
    assert mem.lookup(e, "p:ana", [], source="p") is None
    assert mem.lookup(e, None, []) is None  # an anonymous asker
    for i in range(3):  # the checkpoint's own exemplars vote for every asker
        mem.add(e, ["audio.music"], f"shipped{i}", [])
    assert mem.lookup(e, "p:ana", [], source="p").plan == ("audio.music",)  # type: ignore[union-attr]
    assert mem.lookup(e, None, []).plan == ("audio.music",)  # type: ignore[union-attr]
    # with min_sources >= 2 every source votes, and one source alone sets nothing
    pooled = ExemplarMemory(min_votes=3, min_sources=2)
    for i in range(5):
        pooled.add(e, ["audio.speech"], f"q:sock{i}", [], source="q")
    assert pooled.lookup(e, "p:ana", [], source="p") is None


def test_survivors_are_exactly_what_adding_everything_leaves() -> None:
    # the rebuild embeds only `survivors`: they must equal the real sequence's outcome
    rng = np.random.default_rng(3)
    mem = ExemplarMemory(capacity=30, per_creator=4, max_source_share=0.4)
    for i in range(10):  # a checkpoint's own exemplars first
        mem.add(rng.normal(size=4), [f"b{i}"], f"c{i % 3}", [])
    entries = [(f"{s}:c{rng.integers(12)}", s) for s in rng.choice(["p", "q", "r"], 300)]
    keep = mem.survivors(entries)
    full = mem.with_settings(mem.cfg)
    for j, (c, s) in enumerate(entries):
        full.add(rng.normal(size=4), [f"e{j}"], c, [], source=s)
    left = {full._plans[i][0] for i in full._rows()}
    expected = {f"b{j}" for j in range(10) if keep[j]} | {
        f"e{j}" for j in range(len(entries)) if keep[10 + j]
    }
    assert left == expected and 0 < len(left) <= 30
    rebuilt = mem.with_settings(mem.cfg, keep[:10])
    assert len(rebuilt) == int(keep[:10].sum())
