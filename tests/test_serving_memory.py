"""The server's exemplar memory with a real router: signed feedback becomes an exemplar,
the creator's next signed request uses it, other creators do not, and the memory is
rebuilt from the feedback log by the next server (the model folder is never written)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from serving_helpers import PLATFORM, PLATFORM_KEY, make_router_checkpoint, signed_post, write_keys

from studio_align.serving.app import ServeConfig, create_app

REQ = {"text": "turn this photo into a short clip", "attachments": ["image"]}


def _ready(client: TestClient) -> None:
    for _ in range(2000):
        if client.get("/healthz").status_code == 200:
            return
        time.sleep(0.05)
    raise AssertionError(client.get("/healthz").json())


@pytest.mark.slow  # a real router compiled in process: tens of seconds on 2 cores
def test_feedback_becomes_an_exemplar_for_that_creator(tmp_path: Path) -> None:
    ck = make_router_checkpoint(tmp_path / "router", seed=0, version="v")
    cfg = ServeConfig(
        checkpoint=str(ck), feedback_dir=str(tmp_path / "fb"), compile_cache_dir=None,
        warmup=False, batch_buckets=[1], max_batch=1,
        feedback_keys_file=str(write_keys(tmp_path / "keys.toml", **{PLATFORM: PLATFORM_KEY})),
    )  # fmt: skip
    with TestClient(create_app(cfg)) as client:
        _ready(client)
        first = signed_post(client, "/v1/route", {**REQ, "creator": "ana"}).json()
        assert first["source"] == "model"
        # a plan the untrained router did not give: the creator re-routed to it
        final = (
            ["wan.image_to_video", "audio.music"]
            if first["plan"] != ["wan.image_to_video", "audio.music"]
            else ["wan.image_to_video"]
        )
        fb = {"request": REQ, "proposed": first["plan"], "final": final,
              "outcome": "rerouted", "creator": "ana", "session": "s1"}  # fmt: skip
        assert signed_post(client, "/v1/feedback", fb).status_code == 200
        again = signed_post(client, "/v1/route", {**REQ, "creator": "ana"}).json()
        assert again["source"] == "creator_memory"
        assert again["plan"] == final and again["abstain"] is False
        other = signed_post(client, "/v1/route", {**REQ, "creator": "bo"}).json()
        assert other["source"] == "model"  # one exemplar of another creator: no population vote
        assert other["plan"] == first["plan"]
        # abandoned feedback teaches nothing
        gone = {**fb, "outcome": "abandoned", "final": None, "session": "s2", "creator": "bo"}
        assert signed_post(client, "/v1/feedback", gone).status_code == 200
    assert sorted(p.name for p in ck.iterdir() if p.name.startswith("memory")) == []
    with TestClient(create_app(cfg)) as client:  # a restart rebuilds it from the log
        _ready(client)
        back = signed_post(client, "/v1/route", {**REQ, "creator": "ana"}).json()
        assert back["source"] == "creator_memory" and back["plan"] == final


@pytest.mark.slow  # two real servers (subprocesses) compile a router
def test_acknowledged_feedback_survives_sigkill(tmp_path: Path) -> None:
    import json
    import urllib.request

    from serving_helpers import ServerProcess

    from studio_align.serving.auth import signed_headers

    ck = make_router_checkpoint(tmp_path / "router", seed=0, version="v")
    keys = write_keys(tmp_path / "keys.toml", **{PLATFORM: PLATFORM_KEY})
    fb_log = tmp_path / "fb" / "events.jsonl"
    extra = ("--feedback-keys", str(keys), "--set", "batch_buckets=[1]", "--set", "max_batch=1")

    def post(srv: ServerProcess, path: str, body: dict) -> dict:
        raw = json.dumps(body).encode()
        h = {**signed_headers(PLATFORM, PLATFORM_KEY.encode(), "POST", path, raw),
             "Content-Type": "application/json"}  # fmt: skip
        req = urllib.request.Request(srv.url + path, raw, h, method="POST")
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.load(r)

    srv = ServerProcess(ck, fb_log, *extra)
    try:
        srv.wait_healthy()
        first = post(srv, "/v1/route", {**REQ, "creator": "ana"})
        final = next(p for p in (["wan.image_to_video", "audio.music"], ["wan.image_to_video"])
                     if p != first["plan"])  # fmt: skip
        fb = {"request": REQ, "proposed": first["plan"], "final": final,
              "outcome": "rerouted", "creator": "ana", "session": "s1"}  # fmt: skip
        assert post(srv, "/v1/feedback", fb)["written"] is True
    finally:
        srv.proc.kill()  # SIGKILL: no shutdown hook runs
        srv.proc.wait()
    srv = ServerProcess(ck, fb_log, *extra)
    try:
        srv.wait_healthy()
        back = post(srv, "/v1/route", {**REQ, "creator": "ana"})
        assert back["source"] == "creator_memory" and back["plan"] == final
    finally:
        srv.stop()


def test_a_log_line_longer_than_a_read_chunk_does_not_stop_the_learner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line longer than `CHUNK_BYTES` (possible when `max_body_bytes` is raised past it)
    used to end every read at its start: nothing after it was ever learned."""
    from studio_align.serving import learning
    from studio_align.serving.auth import Verifier

    monkeypatch.setattr(learning, "CHUNK_BYTES", 64)
    log = tmp_path / "feedback.jsonl"
    lines = [{"type": "route", "n": 1}, {"type": "route", "text": "x" * 300}, {"n": 3}]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    learner = learning.Learner(log, Verifier({}))
    fd = os.open(log, os.O_RDONLY)
    try:
        for stop in (None, log.stat().st_size):  # following, and a rebuild's second pass
            read = [(e, end) for events, end in learner._chunks(fd, 0, stop=stop) for e in events]
            assert [e.get("n") for e, _ in read] == [1, None, 3]
            assert read[-1][1] == log.stat().st_size
    finally:
        os.close(fd)
