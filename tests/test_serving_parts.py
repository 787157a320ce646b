"""Unit tests of the server's parts that need no model: batcher, feedback log, metrics."""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import threading
import time
from pathlib import Path

import pytest

from studio_align.serving.batcher import DynamicBatcher
from studio_align.serving.feedback import FeedbackLog, route_event
from studio_align.serving.metrics import Metrics


def test_batcher_gathers_concurrent_requests_into_one_call() -> None:
    calls: list[list[int]] = []

    def fn(items: list[int]) -> list[int]:
        calls.append(list(items))
        time.sleep(0.01)
        return [i * 2 for i in items]

    async def main() -> list[int]:
        b: DynamicBatcher[int, int] = DynamicBatcher(fn, max_batch=16, max_wait_ms=20)
        await b.start()
        try:
            return list(await asyncio.gather(*(b.submit(i) for i in range(10))))
        finally:
            await b.stop()

    out = asyncio.run(main())
    assert out == [i * 2 for i in range(10)]
    assert sum(len(c) for c in calls) == 10
    assert len(calls) <= 2, calls  # gathered, not one call per request


def test_batcher_respects_max_batch_and_reports_sizes() -> None:
    sizes: list[int] = []

    async def main() -> None:
        b: DynamicBatcher[int, int] = DynamicBatcher(
            lambda xs: xs, max_batch=4, max_wait_ms=50, on_batch=sizes.append
        )
        await b.start()
        try:
            assert await b.submit_many(list(range(10))) == list(range(10))
        finally:
            await b.stop()

    asyncio.run(main())
    assert max(sizes) <= 4 and sum(sizes) == 10


def test_batcher_failure_fails_the_batch_not_the_loop() -> None:
    def fn(items: list[int]) -> list[int]:
        if 13 in items:
            raise ValueError("unlucky")
        return items

    async def main() -> None:
        b: DynamicBatcher[int, int] = DynamicBatcher(fn, max_batch=1, max_wait_ms=0)
        await b.start()
        try:
            with pytest.raises(ValueError, match="unlucky"):
                await b.submit(13)
            assert await b.submit(7) == 7  # the loop survived
        finally:
            await b.stop()

    asyncio.run(main())


def test_batcher_lone_request_waits_at_most_max_wait() -> None:
    async def main() -> float:
        b: DynamicBatcher[int, int] = DynamicBatcher(lambda xs: xs, max_batch=64, max_wait_ms=5)
        await b.start()
        try:
            await b.submit(0)  # first call warms the thread pool
            t0 = time.perf_counter()
            await b.submit(1)
            return time.perf_counter() - t0
        finally:
            await b.stop()

    assert asyncio.run(main()) < 0.2


def _append_many(path: str, worker: int, n: int) -> None:
    log = FeedbackLog(path)
    for i in range(n):
        ev = route_event(
            request={"text": f"w{worker} r{i} " + "x" * (i * 37 % 3000), "attachments": ["image"]},
            proposed=["wan.image_to_video"],
            final=["wan.image_to_video", "audio.music"],
            outcome="rerouted",
            creator=f"c{worker}",
            session=None,
        )
        log.append(ev)


def test_feedback_log_concurrent_writers_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "fb" / "events.jsonl"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(path), w, 60)) for w in range(3)]
    for p in procs:
        p.start()
    threads = [
        threading.Thread(target=_append_many, args=(str(path), 10 + t, 60)) for t in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    lines = raw.split(b"\n")[:-1]
    assert len(lines) == 6 * 60
    events = [json.loads(line) for line in lines]  # any interleaving would break JSON
    assert {e["type"] for e in events} == {"route"}
    assert len({e["id"] for e in events}) == len(events)


def test_accepted_event_final_defaults_to_proposed() -> None:
    ev = route_event(
        request={"text": "hi", "attachments": []},
        proposed=["audio.music"],
        final=[],
        outcome="accepted",
        creator="c1",
        session="s1",
    )
    assert ev["final"] == ["audio.music"] and ev["session"] == "s1" and ev["ts"].endswith("Z")


def test_metrics_render_prometheus_text() -> None:
    m = Metrics()
    m.model_version = "abc"
    m.record_request("/v1/route", 200, 12.0)
    m.record_request("/v1/route", 422)
    m.record_batch(8)
    text = m.render()
    assert 'studio_align_requests_total{path="/v1/route",status="200"} 1' in text
    assert 'studio_align_requests_total{path="/v1/route",status="422"} 1' in text
    assert 'studio_align_route_latency_ms_bucket{le="20"} 1' in text
    assert 'studio_align_route_latency_ms_bucket{le="10"} 0' in text
    assert "studio_align_batch_size_count 1" in text
    assert 'studio_align_model_info{version="abc"} 1' in text
