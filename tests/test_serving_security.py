"""Issue 13's server defects, each reproduced and now failing safely (plus issue 18's
readiness, index and error-form checks).

Most tests drive the real app in-process with a fake router (fast, no compile); the
model-level ones (NaN weights, a bundle naming a foreign class) load real tiny router
checkpoints, which are refused before anything is compiled. Slow clients are checked
against the real uvicorn server with the bounded protocol, on loopback.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from serving_helpers import (
    PLATFORM,
    PLATFORM_KEY,
    TOKEN,
    FakeRouter,
    fake_loader,
    live_server,
    make_router_checkpoint,
    write_keys,
)
from serving_helpers import serve_config as _cfg

from studio_align.errors import ConfigError
from studio_align.serving.app import create_app, load_router

FB = {
    "request": {"text": "make this a video", "attachments": ["image"]},
    "proposed": ["wan.image_to_video"],
    "outcome": "accepted",
    "creator": "c1",
    "session": "s1",
}


def _ready(client: TestClient) -> None:
    for _ in range(400):
        if client.get("/healthz").status_code == 200:
            return
        time.sleep(0.01)
    raise AssertionError(client.get("/healthz").json())


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(_cfg(tmp_path, admin_token=TOKEN), loader=fake_loader)
    with TestClient(app) as c:
        _ready(c)
        yield c


def admin(c: TestClient, checkpoint: str | None, token: str | bytes | None = TOKEN) -> Any:
    headers = {"x-admin-token": token} if token is not None else {}
    return c.post("/admin/reload", json={"checkpoint": checkpoint}, headers=headers)


# -- 1. admin routes ---------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.7", "example.org"])
def test_non_loopback_bind_without_token_refuses_to_start(tmp_path: Path, host: str) -> None:
    with pytest.raises(ConfigError, match="not a loopback address"):
        create_app(_cfg(tmp_path, host=host), loader=fake_loader)
    with pytest.raises(ConfigError, match="feedback_keys_file"):
        create_app(_cfg(tmp_path, host=host, admin_token=TOKEN), loader=fake_loader)
    keys = str(write_keys(tmp_path / "keys.toml", **{PLATFORM: PLATFORM_KEY}))
    create_app(
        _cfg(tmp_path, host=host, admin_token=TOKEN, feedback_keys_file=keys), loader=fake_loader
    )  # fine: both admin and feedback need credentials; fmt: skip
    with pytest.raises(ConfigError, match="at least 16"):
        create_app(_cfg(tmp_path, host="127.0.0.1", admin_token="short"), loader=fake_loader)


def test_admin_token_is_required_when_set(client: TestClient, tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    assert admin(client, str(tmp_path / "b"), token=None).status_code == 401
    assert admin(client, str(tmp_path / "b"), token="x" * 23).status_code == 403
    bad = client.post("/admin/reload", json={}, headers={"x-admin-token": TOKEN.encode() + b"\xff"})
    assert bad.status_code == 403
    r = admin(client, str(tmp_path / "b"))
    assert r.status_code == 200 and r.json()["model_version"] == "b"


def test_reload_only_from_checkpoint_roots_and_reveals_nothing(
    client: TestClient, tmp_path: Path
) -> None:
    outside = [
        "/etc",
        "/etc/does-not-exist",
        str(tmp_path.parent),
        str(tmp_path / ".." / "x"),
        "relative/path",
        "\x00",
    ]
    link = tmp_path / "escape"
    link.symlink_to("/etc")  # a symlink inside the root that leads out of it
    outside.append(str(link))
    answers = {admin(client, p).text for p in outside}
    assert len(answers) == 1  # the same answer whether the path exists or not
    assert "checkpoint_roots" in answers.pop()
    text = client.get("/metrics").text
    assert 'studio_align_reload_failures_total{reason="outside_roots"} 7.0' in text


def test_bundle_naming_a_foreign_class_is_never_imported(tmp_path: Path) -> None:
    """The bundle names a module whose import would leave a marker file: it is refused."""
    ck = make_router_checkpoint(tmp_path / "evil", seed=0, version="evil")
    marker = tmp_path / "imported"
    mod = tmp_path / "evil_mod_13.py"
    mod.write_text(f"open({str(marker)!r}, 'w').write('pwned')\nclass Model: ...\n")
    sys.path.insert(0, str(tmp_path))
    try:
        meta = json.loads((ck / "bundle.json").read_text())
        meta["model_class"] = "evil_mod_13.Model"
        (ck / "bundle.json").write_text(json.dumps(meta))
        app = create_app(_cfg(tmp_path, admin_token=TOKEN), loader=_mixed_loader)
        with TestClient(app) as c:
            _ready(c)
            r = admin(c, str(ck))
            assert r.status_code == 422 and str(tmp_path) not in r.text
            assert c.get("/healthz").json()["model_version"] == "a"  # still serving
    finally:
        sys.path.remove(str(tmp_path))
    assert not marker.exists()


def _mixed_loader(path: str) -> Any:
    """Fake start-up model, real router loading for every reload."""
    return FakeRouter("a") if Path(path).name == "a" else load_router(path)


# -- 2. NaN weights and non-finite outputs -----------------------------------------------------


def test_reload_of_nan_weights_is_refused_by_the_probe(tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    ck = make_router_checkpoint(tmp_path / "nanw", seed=0, version="nanw")
    t = load_file(str(ck / "params.safetensors"))
    t = {k: (np.full_like(v, np.nan) if v.dtype.kind == "f" else v) for k, v in t.items()}
    save_file(t, str(ck / "params.safetensors"))
    app = create_app(_cfg(tmp_path, admin_token=TOKEN, warmup=False), loader=_mixed_loader)
    with TestClient(app) as c:
        _ready(c)
        r = admin(c, str(ck))
        assert r.status_code == 422 and "non-finite weight" in r.json()["error"]
        assert c.get("/healthz").json() == {"status": "ok", "model_version": "a"}
        assert 'reload_failures_total{reason="probe"} 1.0' in c.get("/metrics").text


def test_nan_outputs_are_refused_on_reload_and_degrade_health(
    client: TestClient, tmp_path: Path
) -> None:
    (tmp_path / "nan-model").mkdir()
    r = admin(client, str(tmp_path / "nan-model"))
    assert r.status_code == 422 and "non-finite confidence" in r.json()["error"]
    # a model that turns non-finite while serving: answers abstain, health says degraded
    client.app.state.serve.router.nan = True  # type: ignore[attr-defined]
    out = client.post("/v1/route", json={"text": "hi", "attachments": []}).json()
    assert out["abstain"] is True and out["confidence"] == 0.0
    h = client.get("/healthz")
    assert h.status_code == 503 and h.json()["status"] == "degraded"


# -- 3. metrics ---------------------------------------------------------------------------------


def test_metrics_cannot_be_forged_and_do_not_grow_with_paths(client: TestClient) -> None:
    forged = "/x%22%7D%20999%0Astudio_align_reloads_total%2042%0A%23"
    assert client.get(forged).status_code == 404
    client.get("/metrics")  # its own series exist from here on
    before = len(client.get("/metrics").content)
    for i in range(500):
        client.get(f"/unique/{i}/{'z' * 50}")
    text = client.get("/metrics").text
    assert "studio_align_reloads_total 42" not in text
    assert "unique" not in text and "} 999" not in text and "\n999" not in text
    assert abs(len(text.encode()) - before) < 1024
    for line in text.splitlines():
        if line.startswith("studio_align_requests_total{"):
            route = line.split('route="')[1].split('"')[0]
            assert route in {"unmatched", "/healthz", "/metrics", "/v1/route"}, line


# -- 4. headers, bodies, one error shape ----------------------------------------------------------


def test_undecodable_header_is_not_a_500(client: TestClient) -> None:
    for path in ("/healthz", "/metrics", "/"):
        r = client.get(path, headers={"x-odd": b"\xff\xfe", "user-agent": b"\xc3("})
        assert r.status_code == 200
    r = client.post(
        "/v1/route",
        content=b'{"text": "hi"}',
        headers={"content-type": b"application/json; charset=\xff"},
    )
    assert r.status_code == 200


def test_over_limit_and_bad_encoding_are_4xx_in_the_error_shape(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(100):
            yield b" " * 1024

    cases = [
        (dict(content=chunks()), 413),  # chunked, no content-length
        (dict(content=b" " * 100_000), 413),
        (dict(content=b'{"text": "caf\xe9"}'), 400),
        (dict(content=b"{not json"), 400),
        (dict(content=b'{"text": "hi"}', headers={"content-type": "text/plain"}), 415),
    ]
    for kwargs, status in cases:
        headers = {"content-type": "application/json", **kwargs.pop("headers", {})}
        r = client.post("/v1/route", headers=headers, **kwargs)
        assert r.status_code == status, r.text
        assert set(r.json()) == {"error"} and r.json()["error"]
    for r in (client.get("/nope"), client.delete("/healthz"), client.get("/v1/route")):
        assert set(r.json()) == {"error"}


def test_validation_errors_name_only_the_attempted_form(client: TestClient) -> None:
    single = client.post("/v1/route", json={"text": "hi", "attachments": ["hologram"]}).json()
    assert single["error"].startswith("attachments[0]:")
    assert "requests" not in single["error"] and "Extra inputs" not in single["error"]
    batch = client.post("/v1/route", json={"requests": [{"text": ""}]}).json()
    assert batch["error"].startswith("requests[0].text:") and "Field required" not in batch["error"]
    assert "JSON object" in client.post("/v1/route", json=[1, 2]).json()["error"]
    blank = client.post("/v1/route", json={"text": "  \n", "attachments": ["image"]})
    assert blank.status_code == 422 and blank.json()["error"] == (
        "text: is blank: it must hold something besides whitespace"
    )


# -- feedback --------------------------------------------------------------------------------------


def test_feedback_is_idempotent_on_the_event_id(client: TestClient, tmp_path: Path) -> None:
    body = {**FB, "id": "evt-42"}
    first, again = (client.post("/v1/feedback", json=body) for _ in range(2))
    assert first.json() == {"id": "evt-42", "written": True, "memory": "ignored"}
    assert again.json() == {"id": "evt-42", "written": False, "memory": "ignored"}
    assert client.post("/v1/feedback", json={**body, "creator": "other"}).status_code == 409
    log = tmp_path / "feedback" / "route_events.jsonl"  # beside the checkpoint by default
    ids = [json.loads(x)["id"] for x in log.read_text().splitlines()]
    assert ids == ["evt-42"]
    # a second server on the same log (a restart) also recognises the retry
    app = create_app(_cfg(tmp_path), loader=fake_loader)
    with TestClient(app) as c2:
        _ready(c2)
        assert c2.post("/v1/feedback", json=body).json()["written"] is False
    assert len(log.read_text().splitlines()) == 1


def test_a_server_rotates_its_feedback_log_and_still_knows_retries(tmp_path: Path) -> None:
    app = create_app(_cfg(tmp_path, feedback_rotate_mb=0.001), loader=fake_loader)  # ~1 KB
    with TestClient(app) as c:
        _ready(c)
        for i in range(12):
            assert c.post("/v1/feedback", json={**FB, "id": f"evt-{i}"}).json()["written"]
        folder = tmp_path / "feedback"
        assert len(list(folder.glob("route_events.*.jsonl"))) >= 2  # closed segments
        assert c.post("/v1/feedback", json={**FB, "id": "evt-10"}).json()["written"] is False
    ids = [json.loads(x)["id"] for p in folder.glob("*.jsonl") for x in p.read_text().splitlines()]
    assert sorted(ids) == sorted(f"evt-{i}" for i in range(12))


def test_abandoned_with_a_final_plan_is_refused(client: TestClient) -> None:
    body = {**FB, "outcome": "abandoned", "final": ["wan.image_to_video"]}
    r = client.post("/v1/feedback", json=body)
    assert r.status_code == 422 and "abandoned" in r.json()["error"]
    assert client.post("/v1/feedback", json={**body, "final": None}).status_code == 200


# -- issue 18: readiness and index --------------------------------------------------------------


def test_warming_is_503_with_progress_then_ready(tmp_path: Path) -> None:
    gate = threading.Event()
    lines: list[str] = []
    app = create_app(
        _cfg(tmp_path, max_batch=4),
        loader=lambda p: FakeRouter("a", gate=gate),
        announce=lines.append,
    )
    with TestClient(app) as c:
        h = c.get("/healthz")
        assert h.status_code == 503 and h.json()["status"] == "warming"
        assert h.json()["progress"]["shapes_total"] == 3  # buckets 1, 2, 4
        r = c.post("/v1/route", json={"text": "hi"})
        assert r.status_code == 503 and r.headers["retry-after"] and r.json()["error"]
        gate.set()
        _ready(c)
        assert c.get("/").json()["model"] == "a"
    assert lines[-1].startswith("ready in ") and "warming up (3/3 shapes)" in lines


def test_index_links_docs_and_metrics(client: TestClient) -> None:
    body = client.get("/").json()
    assert body["links"]["docs"] == "/docs" and body["links"]["metrics"] == "/metrics"
    assert body["version"] and body["model"] == "a"


# -- slow clients: real uvicorn with the bounded protocol ----------------------------------------


@pytest.fixture(params=["httptools", "h11"])
def live(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[int]:
    cfg = _cfg(tmp_path, request_timeout_s=1.0)
    with live_server(cfg, parser=request.param, timeout_keep_alive=1) as port:
        yield port


def _closed_by_server(sock: socket.socket, trickle: bool) -> bool:
    sock.settimeout(0.5)
    sent = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
    sock.sendall(sent)
    for _ in range(60):  # at most ~30 s of trickling; the server's limit is 1 s
        try:
            if trickle:
                sock.sendall(b"X-a: b\r\n")
            if sock.recv(1024) == b"":
                return True
        except TimeoutError:
            continue
        except OSError:
            return True
    return False


def test_slow_clients_are_dropped(live: int) -> None:
    socks = [socket.create_connection(("127.0.0.1", live)) for _ in range(3)]
    try:
        assert all(_closed_by_server(s, trickle=True) for s in socks)
        with socket.create_connection(("127.0.0.1", live)) as idle:
            assert _closed_by_server(idle, trickle=False)
        with socket.create_connection(("127.0.0.1", live)) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Bad: \xff\r\n\r\n")
            assert s.recv(1024).startswith(b"HTTP/1.1 200")
    finally:
        for s in socks:
            s.close()


@pytest.mark.parametrize("parser", ["httptools", "h11"])
def test_oversized_heads_are_refused_and_keep_alive_still_works(
    tmp_path: Path, parser: str
) -> None:
    # a long read deadline, so only the head cap can end the first connection in time
    with live_server(_cfg(tmp_path, request_timeout_s=60.0), parser=parser) as live:
        _oversized_head_is_refused(live)
        _keep_alive_with_big_headers(live)


def _oversized_head_is_refused(live: int) -> None:
    with socket.create_connection(("127.0.0.1", live)) as s:
        s.settimeout(5)
        try:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            for _ in range(40):  # 40 KiB of headers in 1 KiB writes, never ending the head
                s.sendall(b"X-Pad: " + b"a" * 1017 + b"\r\n")
                time.sleep(0.002)
            reply = s.recv(1024)
        except (BrokenPipeError, ConnectionResetError):
            reply = b""  # closed by the server while we were still sending
        assert reply.startswith(b"HTTP/1.1 400") or reply == b""


def _keep_alive_with_big_headers(live: int) -> None:
    with socket.create_connection(("127.0.0.1", live)) as s:
        s.settimeout(5)
        for _ in range(2):  # two requests on one connection, both answered
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 4000 + b"\r\n\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 200")
