"""Unit tests of the server's parts that need no model: batcher, feedback log, metrics, heap."""

from __future__ import annotations

import asyncio
import gc
import json
import multiprocessing as mp
import threading
import time
import typing
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError
from serving_helpers import fake_loader, serve_config

from studio_align.catalog import ATTACHMENT_KINDS, default_catalog
from studio_align.data import schemas as log_schemas
from studio_align.data.reader import LogReader
from studio_align.serving.app import create_app
from studio_align.serving.batcher import DynamicBatcher
from studio_align.serving.feedback import FeedbackLog, check_route_event, route_event
from studio_align.serving.metrics import Metrics
from studio_align.serving.schemas import MAX_TEXT_CHARS, RouteRequest


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


def test_batcher_lone_request_is_not_held_for_a_full_batch() -> None:
    """A lone request runs as a batch of one after the wait, without companions."""
    sizes: list[int] = []

    async def main() -> list[int]:
        b: DynamicBatcher[int, int] = DynamicBatcher(
            lambda xs: xs, max_batch=64, max_wait_ms=5, on_batch=sizes.append
        )
        await b.start()
        try:
            return [await b.submit(0), await b.submit(1)]  # one after the other
        finally:
            await b.stop()

    assert asyncio.run(main()) == [0, 1]
    assert sizes == [1, 1]  # each flushed alone: nothing waited for a 64-request batch


def _append_many(path: str, worker: int, n: int) -> None:
    log = FeedbackLog(path)
    for i in range(n):
        ev = route_event(
            request={"text": f"w{worker} r{i} " + "x" * (i * 37 % 3000), "attachments": ["image"]},
            proposed=["wan.image_to_video"],
            final=["wan.image_to_video", "audio.music"],
            outcome="rerouted",
            creator=f"c{worker}",
            session=f"s{worker}",
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


def _event(outcome: str, proposed: list[str], final: list[str] | None, atts=("image",)) -> dict:
    return route_event(
        request={"text": "hi", "attachments": list(atts)},
        proposed=proposed,
        final=final,
        outcome=outcome,
        creator="c1",
        session="s1",
    )


def test_feedback_events_are_exactly_what_the_log_reader_accepts(tmp_path: Path) -> None:
    cat = default_catalog()
    good = [
        _event("accepted", ["wan.image_to_video"], None),
        _event("accepted", ["wan.image_to_video"], ["wan.image_to_video"]),
        _event("rerouted", ["wan.image_to_video"], ["wan.image_to_video", "audio.music"]),
        _event("abandoned", ["wan.image_to_video"], ["ignored.for_abandoned"]),
        _event(
            "abandoned", ["runway.video_to_video"], None
        ),  # a rejected proposal may be unsatisfiable
    ]
    bad = {
        "differs": _event("accepted", ["wan.image_to_video"], ["audio.music"]),
        "no final": _event("rerouted", ["wan.image_to_video"], None),
        "unknown": _event("rerouted", ["wan.image_to_video"], ["nope.step"]),
        "unsatisfiable": _event("rerouted", ["audio.music"], ["runway.video_to_video"], atts=()),
    }
    assert [check_route_event(e, cat) for e in good] == [None] * len(good)
    reasons = {k: check_route_event(e, cat) for k, e in bad.items()}
    assert all(reasons.values()), reasons
    assert "nope.step" in str(reasons["unknown"]) and "needs video" in str(reasons["unsatisfiable"])
    # and the reader agrees line for line
    log = tmp_path / "fb.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in [*good, *bad.values()]))
    reader = LogReader([log], catalog=cat)
    assert len(list(reader)) == len(good)
    assert reader.summary.invalid_count == len(bad)


def test_metrics_render_prometheus_text() -> None:
    m = Metrics()
    m.set_model_version("abc")
    m.record_request("/v1/route", "POST", 200, 0.012)
    m.record_request("/v1/route", "POST", 422, 0.001)
    m.record_request(None, "BREW", 404, 0.001)  # unmatched path, unknown method
    m.route_latency.observe(0.012)
    m.record_batch(8)
    m.set_model_version("def")  # a swap keeps one model_info series
    text = m.render().decode()
    assert 'studio_align_requests_total{method="POST",route="/v1/route",status="200"} 1.0' in text
    assert 'studio_align_requests_total{method="POST",route="/v1/route",status="422"} 1.0' in text
    assert 'studio_align_requests_total{method="OTHER",route="unmatched",status="404"} 1.0' in text
    assert 'studio_align_route_latency_seconds_bucket{le="0.02"} 1.0' in text
    assert 'studio_align_route_latency_seconds_bucket{le="0.01"} 0.0' in text
    assert "studio_align_batch_size_count 1.0" in text
    assert 'studio_align_model_info{version="def"} 1.0' in text and '"abc"' not in text
    assert "# HELP studio_align_requests_total" in text


def test_route_request_is_the_log_request_with_server_bounds() -> None:
    """Issue 12 item 4: the server's request extends the data layer's, it mirrors nothing."""
    assert issubclass(RouteRequest, log_schemas.RouteRequest)
    assert typing.get_args(log_schemas.AttachmentKind) == ATTACHMENT_KINDS
    r = RouteRequest.model_validate({"text": "make a video", "attachments": ["image"]})
    # `creator` is the server's own addition (whose exemplars to consult); the rest is the log's
    logged = r.model_dump(exclude={"creator"})
    assert log_schemas.RouteRequest.model_validate(logged).model_dump() == logged
    bad = [
        {"text": ""},  # the server's bounds
        {"text": " \n\t "},  # blank: nothing asked
        {"text": "x" * (MAX_TEXT_CHARS + 1)},
        {"text": "x", "attachments": ["image"] * 9},
        {"text": "x", "attachment": ["image"]},  # unknown key: refused, not ignored
        {"text": 5},  # the log's strict types
        {"text": "x", "attachments": ["pdf"]},
    ]
    for body in bad:
        with pytest.raises(ValidationError):
            RouteRequest.model_validate(body)


def test_ready_server_freezes_its_heap_and_the_stop_unfreezes_it(tmp_path: Path) -> None:
    """Once warm, the garbage collector no longer walks the model and JAX's caches (a full
    collection was a ~0.9 s pause inside a request); stopping the app undoes it."""
    gc.unfreeze()
    with TestClient(create_app(serve_config(tmp_path), loader=fake_loader)) as c:
        for _ in range(400):
            if c.get("/healthz").status_code == 200:
                break
            time.sleep(0.01)
        assert c.get("/healthz").status_code == 200
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
