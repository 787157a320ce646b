"""The feedback log is bounded: it is closed as a segment once full, nothing is lost or
written twice across a rotation (one writer, several processes, a restart), `data
compile`'s folder expansion reads every segment, and the server's learner follows the log
across rotations and rebuilds from the newest segment and the live log."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from studio_align.data.compile import compile_logs
from studio_align.data.paths import expand_log_paths
from studio_align.serving import learning
from studio_align.serving import segments as segment_names
from studio_align.serving.auth import Verifier
from studio_align.serving.feedback import DuplicateEventError, FeedbackLog, route_event
from studio_align.serving.segments import segments

ROTATE = 2048


def _event(i: int, who: str = "w0") -> dict[str, Any]:
    return route_event(
        request={"text": f"{who} request {i} " + "x" * (i * 37 % 200), "attachments": []},
        proposed=["audio.music"],
        final=None,
        outcome="accepted",
        creator=f"c-{who}",
        session=f"s-{who}",
        event_id=f"{who}-{i}",
    )


def _lines(folder: Path) -> list[dict[str, Any]]:
    out = []
    for p in expand_log_paths([folder]):
        raw = p.read_bytes()
        assert raw == b"" or raw.endswith(b"\n"), p
        out += [json.loads(line) for line in raw.splitlines()]
    return out


def test_a_full_log_is_closed_as_a_segment_and_nothing_is_lost(tmp_path: Path) -> None:
    path = tmp_path / "fb" / "route_events.jsonl"
    log = FeedbackLog(path, rotate_bytes=ROTATE)
    for i in range(60):
        assert log.append(_event(i))
    closed = segments(path)
    assert len(closed) >= 3
    assert all(p.name.startswith("route_events.") and p.suffix == ".jsonl" for p in closed)
    for p in closed:
        _assert_closed_when_full(p)
    assert path.stat().st_size < ROTATE + max(len(json.dumps(_event(i))) + 1 for i in range(60))
    ids = [e["id"] for e in _lines(path.parent)]
    assert sorted(ids) == sorted(f"w0-{i}" for i in range(60))  # each once, in some file


def _assert_closed_when_full(segment: Path) -> None:
    """Full, and closed by the first write that found it so: nothing was written to it
    after (a writer that had waited for the lock of a file closed meanwhile)."""
    raw = segment.read_bytes()
    last = raw[:-1].rfind(b"\n") + 1
    assert last < ROTATE <= len(raw), segment


def test_a_retry_is_caught_across_a_rotation_and_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "route_events.jsonl"
    log = FeedbackLog(path, rotate_bytes=ROTATE)
    i = 0
    while not segments(path):
        assert log.append(_event(i))
        i += 1
    last_in_segment = _event(i - 2)  # written to the segment just closed
    assert not log.append(last_in_segment)
    restarted = FeedbackLog(path, rotate_bytes=ROTATE)
    assert not restarted.append(last_in_segment)
    changed = {**last_in_segment, "outcome": "abandoned"}
    with pytest.raises(DuplicateEventError):
        restarted.append(changed)
    assert sum(e["id"] == last_in_segment["id"] for e in _lines(tmp_path)) == 1


def test_a_clock_that_went_back_never_overwrites_a_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "route_events.jsonl"
    log = FeedbackLog(path, rotate_bytes=ROTATE)
    i = 0
    while not segments(path):
        log.append(_event(i))
        i += 1

    class Past(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Past:
            return cls(2020, 1, 1, tzinfo=tz)

    monkeypatch.setattr(segment_names, "datetime", Past)
    n = i + 60  # two more rotations at least
    for k in range(i, n):
        log.append(_event(k))
    assert len(segments(path)) >= 3
    firsts = [int(json.loads(p.read_bytes().splitlines()[0])["id"][3:]) for p in segments(path)]
    assert firsts == sorted(firsts)  # names sort as the segments were closed
    assert sorted(e["id"] for e in _lines(tmp_path)) == sorted(f"w0-{k}" for k in range(n))


def test_a_retry_is_caught_when_it_finds_the_log_full_after_another_writer_rotated(
    tmp_path: Path,
) -> None:
    """The retry's original is in the segment another writer closed; the retry itself must
    close the next one. The check comes first, or that segment would drop out of memory."""
    path = tmp_path / "route_events.jsonl"
    first, other = FeedbackLog(path, rotate_bytes=ROTATE), FeedbackLog(path, rotate_bytes=ROTATE)
    original = _event(0, "a")
    assert first.append(original)
    i = 0
    while not segments(path) or path.stat().st_size < ROTATE:  # closed once, then full again
        assert other.append(_event(i, "b"))
        i += 1
    assert not first.append(original)
    assert sum(e["id"] == original["id"] for e in _lines(tmp_path)) == 1


def _append_many(path: str, worker: int, n: int) -> None:
    log = FeedbackLog(path, rotate_bytes=ROTATE)
    for i in range(n):
        log.append(_event(i, f"w{worker}"))
        log.append(_event(i, f"w{worker}"))  # every event retried once


def test_writers_in_several_processes_rotate_without_losing_a_line(tmp_path: Path) -> None:
    path = tmp_path / "fb" / "route_events.jsonl"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(path), w, 50)) for w in range(3)]
    for p in procs:
        p.start()
    _append_many(str(path), 9, 50)
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    events = _lines(path.parent)  # a torn or interleaved line would break JSON
    assert len(segments(path)) >= 10
    for seg in segments(path):
        _assert_closed_when_full(seg)
    ids = [e["id"] for e in events]
    assert len(ids) == len(set(ids)) == 4 * 50


class Recorder:
    """The part of a router the learner calls: what it was taught, in order."""

    def __init__(self) -> None:
        self.memory = None
        self.texts: list[str] = []

    def remember(self, requests: Any, plans: Any, creators: Any, **_: Any) -> int:
        self.texts += [r["text"] for r in requests]
        return len(requests)


def test_the_learner_follows_the_log_across_rotations(tmp_path: Path) -> None:
    path = tmp_path / "route_events.jsonl"
    verifier = Verifier({"acme": b"k" * 32})
    log = FeedbackLog(path, rotate_bytes=ROTATE)

    def write(lo: int, hi: int) -> list[str]:
        evs = [verifier.seal(_event(i), "acme") for i in range(lo, hi)]
        for e in evs:
            assert log.append(e)
        return [e["request"]["text"] for e in evs]

    learner = learning.Learner(path, verifier)
    router = Recorder()
    first = write(0, 5)
    learner.build(router)
    assert router.texts == first
    more = write(5, 60)  # several rotations between two looks
    assert len(segments(path)) >= 2
    learner.follow(router)
    assert router.texts == first + more  # every event once, in order
    rebuilt = Recorder()
    learner.build(rebuilt)  # the newest closed segment and the live log
    newest = [e["request"]["text"] for e in _lines_of([segments(path)[-1], path])]
    assert rebuilt.texts == newest and len(newest) < 60


def _lines_of(paths: list[Path]) -> list[dict[str, Any]]:
    return [json.loads(line) for p in paths for line in p.read_bytes().splitlines()]


def test_data_compile_of_the_folder_reads_every_segment_once(tmp_path: Path) -> None:
    folder = tmp_path / "fb"
    log = FeedbackLog(folder / "route_events.jsonl", rotate_bytes=ROTATE)
    for i in range(40):
        log.append(_event(i))
    assert len(segments(folder / "route_events.jsonl")) >= 2
    res = compile_logs([folder], tmp_path / "out", heldout_fraction=0.0)
    assert res.manifest["events"]["route"] == 40


def test_a_rebuild_while_the_log_is_being_closed_reads_each_event_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "route_events.jsonl"
    verifier = Verifier({"acme": b"k" * 32})
    log = FeedbackLog(path, rotate_bytes=ROTATE)
    i = 0
    while not segments(path) or path.stat().st_size < ROTATE // 2:
        assert log.append(verifier.seal(_event(i), "acme"))
        i += 1
    listed = learning.segments

    def closing_first(p: Path) -> list[Path]:  # another writer closes the log just now
        monkeypatch.setattr(learning, "segments", listed)
        os.rename(path, segment_names.next_segment_path(path))
        return listed(p)

    monkeypatch.setattr(learning, "segments", closing_first)
    router = Recorder()
    learning.Learner(path, verifier).build(router)
    both = [e["request"]["text"] for e in _lines_of(segments(path)[-2:])]
    assert router.texts == both
