"""The attack suite: who can teach the memory, what it serves, and that nothing acknowledged
is lost. The real app and its real feedback log on disk; the model is `MemoryRouter` (the
real `decide`/`remember` over a fake encoder), so each case runs in well under a second.
The soak versions (20,000-post floods, a long reload storm) are marked slow."""

from __future__ import annotations

import errno
import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from serving_helpers import (
    OTHER,
    OTHER_KEY,
    PLATFORM,
    PLATFORM_KEY,
    MemoryRouter,
    memory_loader,
    serve_config,
    signed_post,
    write_keys,
)

from studio_align.errors import ConfigError
from studio_align.serving.app import create_app
from studio_align.serving.feedback import FeedbackLog, LogWriteError

REQ = {"text": "make a poster of a red fox in snow", "attachments": []}
MODEL_PLAN = ["ideogram.text_to_image"]
ALT = ["ideogram.text_to_image", "audio.music"]


def _cfg(tmp: Path, **kw: Any) -> Any:
    keys = write_keys(tmp / "keys.toml", **{PLATFORM: PLATFORM_KEY, OTHER: OTHER_KEY})
    kw.setdefault("feedback_keys_file", str(keys))
    return serve_config(tmp, warmup=False, feedback_dir=str(tmp / "fb"), **kw)


def _ready(client: TestClient) -> None:
    for _ in range(400):
        if client.get("/healthz").status_code == 200:
            return
        time.sleep(0.02)
    raise AssertionError(client.get("/healthz").json())


def _fb(creator: str, plan: list[str] = ALT, req: dict[str, Any] = REQ, **kw: Any) -> dict:
    return {"id": kw.pop("id", f"e-{uuid.uuid4().hex}"), "request": req, "proposed": MODEL_PLAN,
            "final": plan, "outcome": "rerouted", "creator": creator, "session": "s", **kw}  # fmt: skip


def _route(client: TestClient, creator: str | None = None, signed: bool = True, **kw: Any) -> dict:
    body = {**REQ, **({"creator": creator} if creator else {})}
    if signed:
        r = signed_post(client, "/v1/route", body, **kw)
    else:
        r = client.post("/v1/route", json=body)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture
def app_client(tmp_path: Path):
    with TestClient(create_app(_cfg(tmp_path), loader=memory_loader)) as client:
        _ready(client)
        yield client


def _lines(tmp: Path) -> list[dict]:
    path = tmp / "fb" / "route_events.jsonl"
    raw = path.read_bytes() if path.exists() else b""
    assert raw == b"" or raw.endswith(b"\n")  # never a torn tail
    return [json.loads(line) for line in raw.splitlines()]


# -- who can teach the memory ------------------------------------------------------------------


def test_unsigned_feedback_is_refused_and_teaches_nothing(app_client, tmp_path) -> None:
    r = app_client.post("/v1/feedback", json=_fb("ana"))
    assert r.status_code == 401 and "signed request required" in r.json()["error"]
    assert _lines(tmp_path) == []
    bad = signed_post(app_client, "/v1/feedback", _fb("ana"), key="x" * 40)
    assert bad.status_code == 403 and set(bad.json()) == {"error"}
    assert _route(app_client, "ana")["source"] == "model"


def test_a_creators_plan_changes_only_with_its_own_platforms_signature(app_client) -> None:
    # a rival platform names acme's creator: it teaches its own `rival:ana`, never `acme:ana`
    for _ in range(5):
        assert (
            signed_post(app_client, "/v1/feedback", _fb("ana"), OTHER, OTHER_KEY).status_code == 200
        )
    assert _route(app_client, "ana")["plan"] == MODEL_PLAN
    assert _route(app_client, "ana", signed=False)["source"] == "model"
    r = signed_post(app_client, "/v1/feedback", _fb("ana"))
    assert r.status_code == 200 and r.json()["memory"] == "remembered"
    own = _route(app_client, "ana")
    assert own["plan"] == ALT and own["source"] == "creator_memory"
    assert 0.0 <= own["confidence"] <= 1.0 and own["abstain"] is False


def test_nobody_can_probe_another_creators_requests(app_client) -> None:
    assert signed_post(app_client, "/v1/feedback", _fb("ana")).status_code == 200
    # unsigned, naming ana: her exemplars are not consulted, so nothing is revealed
    probe = _route(app_client, "ana", signed=False)
    assert probe["source"] == "model" and probe["plan"] == MODEL_PLAN


def test_a_flood_of_one_id_is_one_vote_and_is_rate_limited(app_client) -> None:
    codes = [signed_post(app_client, "/v1/feedback", _fb("mallory")).status_code for _ in range(40)]
    assert codes.count(200) == 30 and set(codes[30:]) == {429}  # per-creator burst
    anon = _route(app_client, signed=False)
    assert anon["plan"] == MODEL_PLAN and anon["source"] == "model"
    assert _route(app_client, "bo")["plan"] == MODEL_PLAN


def test_population_needs_distinct_creators(app_client) -> None:
    for c in ("c1", "c2"):
        assert signed_post(app_client, "/v1/feedback", _fb(c)).status_code == 200
    assert _route(app_client, "dan")["source"] == "model"  # 2 < min_votes 3
    assert signed_post(app_client, "/v1/feedback", _fb("c3")).status_code == 200
    pop = _route(app_client, "dan")  # a creator of the same platform with no history
    assert pop["source"] == "population_memory" and pop["plan"] == ALT


def test_one_platforms_invented_creators_cannot_set_others_routes(app_client) -> None:
    # the rival names five creators of its own: a majority of its own population
    evil = ["ideogram.text_to_image", "audio.speech"]
    for i in range(5):
        body = _fb(f"sock{i}", evil)
        assert signed_post(app_client, "/v1/feedback", body, OTHER, OTHER_KEY).status_code == 200
    rival = _route(app_client, "new", key=OTHER_KEY, platform=OTHER)
    assert rival["source"] == "population_memory" and rival["plan"] == evil
    # acme's creators and anonymous askers never see the rival's votes
    assert _route(app_client, "dan")["plan"] == MODEL_PLAN
    assert _route(app_client, signed=False)["plan"] == MODEL_PLAN
    for c in ("c1", "c2", "c3"):  # acme's own honest majority still counts for acme
        assert signed_post(app_client, "/v1/feedback", _fb(c)).status_code == 200
    assert _route(app_client, "dan")["plan"] == ALT


def test_a_platform_cannot_squat_another_platforms_event_ids(app_client, tmp_path) -> None:
    first = signed_post(app_client, "/v1/feedback", _fb("x", id="evt-1001"), OTHER, OTHER_KEY)
    assert first.status_code == 200 and first.json()["written"] is True
    mine = signed_post(app_client, "/v1/feedback", _fb("ana", id="evt-1001"))
    assert mine.status_code == 200 and mine.json()["written"] is True
    reuse = signed_post(app_client, "/v1/feedback", _fb("bo", id="evt-1001"))
    assert reuse.status_code == 409  # within its own platform an id is still one event
    assert [(e["id"], e["auth"]["platform"]) for e in _lines(tmp_path)] == [
        ("evt-1001", OTHER), ("evt-1001", PLATFORM)]  # fmt: skip


def test_a_signed_post_without_id_replayed_after_a_restart_is_written_once(tmp_path) -> None:
    from studio_align.serving.auth import signed_headers

    body = _fb("ana")
    del body["id"]
    raw = json.dumps(body).encode()
    h = {**signed_headers(PLATFORM, PLATFORM_KEY.encode(), "POST", "/v1/feedback", raw),
         "Content-Type": "application/json"}  # fmt: skip
    for _ in range(2):  # the second server has forgotten the signatures the first saw
        with TestClient(create_app(_cfg(tmp_path), loader=memory_loader)) as client:
            _ready(client)
            assert client.post("/v1/feedback", content=raw, headers=h).status_code == 200
    assert len(_lines(tmp_path)) == 1


def test_a_replayed_signature_is_refused(app_client) -> None:
    raw = json.dumps(_fb("ana")).encode()
    from studio_align.serving.auth import signed_headers

    h = {**signed_headers(PLATFORM, PLATFORM_KEY.encode(), "POST", "/v1/feedback", raw),
         "Content-Type": "application/json"}  # fmt: skip
    assert app_client.post("/v1/feedback", content=raw, headers=h).status_code == 200
    again = app_client.post("/v1/feedback", content=raw, headers=h)
    assert again.status_code == 403 and "replayed" in again.json()["error"]
    stale = signed_headers(PLATFORM, PLATFORM_KEY.encode(), "POST", "/v1/feedback", raw, now=1e9)
    r = app_client.post(
        "/v1/feedback", content=raw, headers={**stale, "Content-Type": "application/json"}
    )
    assert r.status_code == 403


def _small_memory(tmp: Path) -> Any:
    return _cfg(tmp, memory={"capacity": 40, "max_source_share": 0.5},
                feedback_burst=10_000, creator_feedback_burst=10)  # fmt: skip


def _ana_then_a_rival_flood(client: TestClient) -> None:
    """acme's `ana` re-routes once, then the rival posts 120 exemplars of random creators."""
    _ready(client)
    assert signed_post(client, "/v1/feedback", _fb("ana")).status_code == 200
    for i in range(120):
        body = _fb(f"rnd{i}", ["ideogram.text_to_image", "audio.speech"])
        assert signed_post(client, "/v1/feedback", body, OTHER, OTHER_KEY).status_code == 200


def test_random_ids_from_one_source_cannot_evict_another_sources_exemplars(tmp_path) -> None:
    with TestClient(create_app(_small_memory(tmp_path), loader=memory_loader)) as client:
        _ana_then_a_rival_flood(client)
        assert _route(client, "ana")["plan"] == ALT  # acme's creator keeps her correction
        memory = client.app.state.serve.router.memory  # type: ignore[attr-defined]
        assert memory.counts()["sources"] == {PLATFORM: 1, OTHER: 20}


def test_a_restart_embeds_only_what_the_memory_keeps(tmp_path) -> None:
    cfg = _small_memory(tmp_path)
    with TestClient(create_app(cfg, loader=memory_loader)) as client:
        _ana_then_a_rival_flood(client)
        before = client.app.state.serve.router.memory.counts()  # type: ignore[attr-defined]
    with TestClient(create_app(cfg, loader=memory_loader)) as client:  # rebuilt from the log
        _ready(client)
        router = client.app.state.serve.router  # type: ignore[attr-defined]
        assert router.memory.counts() == before == {
            "exemplars": 21, "creators": 21, "sources": {PLATFORM: 1, OTHER: 20}}  # fmt: skip
        assert router.embedded < 30  # 21 exemplars and the start's probe: not the log's 121
        assert _route(client, "ana")["plan"] == ALT


def test_unsigned_flood_on_a_keyless_loopback_server_teaches_nothing(tmp_path) -> None:
    cfg = serve_config(tmp_path, warmup=False, feedback_dir=str(tmp_path / "fb"),
                       feedback_burst=10_000, creator_feedback_burst=10)  # fmt: skip
    with TestClient(create_app(cfg, loader=memory_loader)) as client:
        _ready(client)
        for i in range(200):
            r = client.post("/v1/feedback", json=_fb(f"rnd{i}"))
            assert r.status_code == 200 and r.json()["memory"] == "ignored"
        assert _route(client, signed=False)["source"] == "model"
        assert len(_lines(tmp_path)) == 200  # kept for training, all whole lines


def test_newest_correction_wins_ties(app_client) -> None:
    for plan in (ALT, ["ideogram.text_to_image", "audio.speech"], [*ALT[:1], "grading.film"]):
        assert signed_post(app_client, "/v1/feedback", _fb("ana", plan)).status_code == 200
        assert _route(app_client, "ana")["plan"] == plan


# -- the memory obeys the router -----------------------------------------------------------------


def test_memory_plans_pass_grammar_max_steps_and_abstention() -> None:
    class Unfamiliar:
        def decide(self, confidence: float, unfamiliarity: float) -> str:
            return "unfamiliar_request"

    router = MemoryRouter("v")
    assert router.remember([REQ], [["audio.music"] * 16], ["a"]) == 0  # above max_steps
    assert router.remember([REQ], [["wan.image_to_video"]], ["a"]) == 0  # needs an image
    router.memory.add(router.embed([REQ])[0], ["audio.music"] * 16, "a", [])
    assert router.decide([REQ], creators=["a"])[0]["source"] == "model"
    router.remember([REQ], [ALT], ["a"])
    d = router.decide([REQ], creators=["a"])[0]
    assert d["source"] == "creator_memory" and 0.0 <= d["confidence"] <= 1.0
    router.calibration = Unfamiliar()
    d = router.decide([REQ], creators=["a"])[0]
    assert d["abstain"] and d["reason"] == "unfamiliar_request" and d["plan"] == ALT


# -- durability ------------------------------------------------------------------------------------


def test_memory_survives_restart_reload_and_a_read_only_model_folder(tmp_path) -> None:
    cfg = _cfg(tmp_path)
    with TestClient(create_app(cfg, loader=memory_loader)) as client:
        _ready(client)
        assert signed_post(client, "/v1/feedback", _fb("ana")).status_code == 200
    (tmp_path / "b").mkdir()
    os.chmod(tmp_path / "a", 0o555)  # the server never writes into the model folder
    try:
        with TestClient(create_app(cfg, loader=memory_loader, announce=lambda m: None)) as client:
            _ready(client)
            assert _route(client, "ana")["plan"] == ALT  # rebuilt from the log at start
            r = client.post("/admin/reload", json={"checkpoint": str(tmp_path / "b")})
            assert r.status_code == 200
            after = _route(client, "ana")
            assert after["plan"] == ALT and after["model_version"] == "b"
    finally:
        os.chmod(tmp_path / "a", 0o755)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == []


def test_feedback_during_warm_up_counts_once_ready(tmp_path) -> None:
    gate = threading.Event()

    class Slow(MemoryRouter):
        def warmup(self, sizes: list[int]) -> None:
            gate.wait(30)

    cfg = _cfg(tmp_path).model_copy(update={"warmup": True})
    with TestClient(create_app(cfg, loader=lambda p: Slow("a"))) as client:
        assert client.get("/healthz").status_code == 503
        r = signed_post(client, "/v1/feedback", _fb("ana"))
        assert r.status_code == 200 and r.json()["memory"] == "pending"
        gate.set()
        _ready(client)
        assert _route(client, "ana")["plan"] == ALT


def test_a_full_disk_rolls_the_log_back_and_answers_507(tmp_path) -> None:
    fail = {"on": False}

    def writer(fd: int, data: bytes) -> int:
        if fail["on"]:
            os.write(fd, data[: len(data) // 2])  # a real short write, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return os.write(fd, data)

    cfg = _cfg(tmp_path)
    log = FeedbackLog(tmp_path / "fb" / "route_events.jsonl", write=writer)
    with TestClient(create_app(cfg, loader=memory_loader, feedback=log)) as client:
        _ready(client)
        assert signed_post(client, "/v1/feedback", _fb("ana")).status_code == 200
        fail["on"] = True
        r = signed_post(client, "/v1/feedback", _fb("bo"))
        assert r.status_code == 507 and set(r.json()) == {"error"}
        assert len(_lines(tmp_path)) == 1  # rolled back to the last complete line
        fail["on"] = False
        assert signed_post(client, "/v1/feedback", _fb("bo")).status_code == 200
        assert [e["creator"] for e in _lines(tmp_path)] == ["ana", "bo"]
        assert _route(client, "bo")["plan"] == ALT


def test_a_torn_tail_is_set_aside_before_the_next_event(tmp_path) -> None:
    path = tmp_path / "fb" / "route_events.jsonl"
    path.parent.mkdir()
    path.write_bytes(b'{"type":"route","id":"whole"}\n{"type":"rou')  # a writer died mid-line
    log = FeedbackLog(path)
    assert log.append({"id": "next", "type": "route"})
    assert path.read_bytes().splitlines()[-1] == b'{"id":"next","type":"route"}'
    assert Path(str(path) + ".torn").read_bytes() == b'{"type":"rou\n'


def test_a_torn_tail_is_never_written_through_a_planted_link(tmp_path) -> None:
    path = tmp_path / "fb" / "route_events.jsonl"
    path.parent.mkdir()
    path.write_bytes(b'{"type":"route","id":"whole"}\n{"type":"rou')
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"keep")
    Path(str(path) + ".torn").symlink_to(victim)
    with pytest.raises(LogWriteError, match="torn"):
        FeedbackLog(path).append({"id": "next", "type": "route"})
    assert victim.read_bytes() == b"keep"
    assert path.read_bytes().endswith(b'{"type":"rou')  # nothing appended after the tail


def test_a_fifo_or_dangling_log_path_is_refused_at_start(tmp_path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ConfigError, match="not a regular file"):
        create_app(_cfg(tmp_path, feedback_log=str(tmp_path / "fifo")), loader=memory_loader)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="dangling"):
        create_app(_cfg(tmp_path, feedback_log=str(tmp_path / "dangling")), loader=memory_loader)


def test_public_bind_without_platform_keys_refuses_to_start(tmp_path) -> None:
    cfg = serve_config(tmp_path, host="0.0.0.0", admin_token="t" * 20)
    with pytest.raises(ConfigError, match="feedback_keys_file"):
        create_app(cfg, loader=memory_loader)


# -- reloads -----------------------------------------------------------------------------------------


def test_watch_reloads_once_per_change(tmp_path) -> None:
    (tmp_path / "b").mkdir()
    cfg = _cfg(tmp_path, watch_seconds=0.02)
    with TestClient(create_app(cfg, loader=memory_loader)) as client:
        _ready(client)
        assert (
            client.post("/admin/reload", json={"checkpoint": str(tmp_path / "b")}).status_code
            == 200
        )
        time.sleep(0.3)
        state = client.app.state.serve  # type: ignore[attr-defined]
        assert state.metrics.reloads._value.get() == 1  # the watcher did not repeat it
        (tmp_path / "b" / "weights").write_text("new")
        for _ in range(100):
            if state.metrics.reloads._value.get() == 2:
                break
            time.sleep(0.02)
        time.sleep(0.2)
        assert state.metrics.reloads._value.get() == 2
        assert state.metrics.reload_failures.labels(reason="busy")._value.get() == 0


def _storm(tmp_path: Path, batches: int, reloads: int) -> tuple[int, int, int]:
    (tmp_path / "b").mkdir(exist_ok=True)
    cfg = _cfg(tmp_path)
    with TestClient(create_app(cfg, loader=memory_loader)) as client:
        _ready(client)
        stop, mixed, errors = threading.Event(), [0], [0]

        def reloader() -> None:
            for i in range(reloads):
                client.post("/admin/reload", json={"checkpoint": str(tmp_path / "ab"[i % 2])})

        def router_calls() -> None:
            body = {"requests": [{**REQ, "text": f"{REQ['text']} {i}"} for i in range(8)]}
            for _ in range(batches):
                r = client.post("/v1/route", json=body)
                if r.status_code >= 500:
                    errors[0] += 1
                elif len({x["model_version"] for x in r.json()["results"]}) > 1:
                    mixed[0] += 1

        threads = [threading.Thread(target=router_calls) for _ in range(4)]
        t = threading.Thread(target=reloader)
        for th in [*threads, t]:
            th.start()
        for th in [*threads, t]:
            th.join()
        stop.set()
        return mixed[0], errors[0], 4 * batches


def test_reload_storm_never_mixes_versions_in_a_batch(tmp_path) -> None:
    mixed, errors, n = _storm(tmp_path, batches=15, reloads=20)
    assert (mixed, errors) == (0, 0), n


@pytest.mark.slow
def test_reload_storm_soak(tmp_path) -> None:
    mixed, errors, n = _storm(tmp_path, batches=300, reloads=400)
    assert (mixed, errors) == (0, 0), n


@pytest.mark.slow
def test_anonymous_flood_of_20000_posts_does_nothing(app_client, tmp_path) -> None:
    assert signed_post(app_client, "/v1/feedback", _fb("ana")).status_code == 200
    for i in range(20_000):
        assert app_client.post("/v1/feedback", json=_fb(f"rnd{i}")).status_code in (401, 429)
    assert _route(app_client, "ana")["plan"] == ALT
    assert _route(app_client, signed=False)["source"] == "model"
    assert len(_lines(tmp_path)) == 1


def test_head_healthz(app_client) -> None:
    r = app_client.head("/healthz")
    assert r.status_code == 200
