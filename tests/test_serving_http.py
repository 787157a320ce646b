"""The real router server in a subprocess, driven by a real HTTP client over loopback."""

from __future__ import annotations

import concurrent.futures as cf

import httpx
import pytest
from serving_helpers import ServerProcess, make_router_checkpoint

from studio_align.catalog import default_catalog
from studio_align.data.reader import LogReader

CAT = default_catalog()
THRESHOLD = 0.6


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("serve")
    ck_a = make_router_checkpoint(tmp / "router-a", seed=0, version="v-a")
    ck_b = make_router_checkpoint(tmp / "router-b", seed=1, version="v-b")
    fb = tmp / "feedback" / "events.jsonl"
    srv = ServerProcess(
        ck_a,
        fb,
        "--abstain-below",
        str(THRESHOLD),
        "--set",
        "max_batch=8",  # fewer shapes to warm up; 16 concurrent requests still batch
        "--set",
        "max_body_bytes=65536",
    )
    try:
        srv.wait_healthy()
        with httpx.Client(base_url=srv.url, timeout=60) as client:
            yield srv, client, ck_a, ck_b, fb
    finally:
        srv.stop()


def _compiles(client: httpx.Client) -> int:
    text = client.get("/metrics").text
    line = next(ln for ln in text.splitlines() if ln.startswith("studio_align_decode_compiles "))
    return int(float(line.split()[-1]))  # prometheus_client writes gauges as floats


def test_route_returns_a_valid_plan_with_confidence(server) -> None:
    _, client, *_ = server
    r = client.post(
        "/v1/route", json={"text": "把这张图做成10秒的视频并配乐", "attachments": ["image"]}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {
        "plan", "confidence", "abstain", "reason", "source", "model_version", "latency_ms"
    }  # fmt: skip
    assert body["source"] == "model"  # no memory in this checkpoint
    assert CAT.is_valid(body["plan"], ["image"])
    assert 0.0 < body["confidence"] <= 1.0
    assert body["abstain"] == (body["confidence"] < THRESHOLD)
    assert body["model_version"] == "v-a"
    assert body["latency_ms"] > 0


def test_batch_form_and_concurrent_requests_are_valid(server) -> None:
    _, client, *_ = server
    reqs = [
        {"text": "a poster of a red fox", "attachments": []},
        {"text": "turn this clip into anime style", "attachments": ["video"]},
        {"text": "product photo of this bag", "attachments": ["image"]},
    ]
    r = client.post("/v1/route", json={"requests": reqs})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert len(results) == 3
    for req, res in zip(reqs, results, strict=True):
        assert CAT.is_valid(res["plan"], req["attachments"])
    with cf.ThreadPoolExecutor(8) as pool:
        codes = list(
            pool.map(lambda i: client.post("/v1/route", json=reqs[i % 3]).status_code, range(40))
        )
    assert codes == [200] * 40


def test_no_request_triggers_a_compile_after_warmup(server) -> None:
    _, client, *_ = server
    before = _compiles(client)
    texts = ["hi", "make a video " * 5, "一段很长的请求 " * 20]
    for t in texts:
        assert (
            client.post("/v1/route", json={"text": t, "attachments": ["image"]}).status_code == 200
        )
    with cf.ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: client.post("/v1/route", json={"text": texts[i % 3]}), range(48)))
    assert _compiles(client) == before


@pytest.mark.parametrize(
    ("kwargs", "status"),
    [
        ({"content": b"{not json", "headers": {"content-type": "application/json"}}, 400),
        ({"json": {"attachments": ["image"]}}, 422),  # missing text
        ({"json": {"text": "hi", "attachments": ["hologram"]}}, 422),  # unknown attachment
        ({"json": {"text": "x" * 3000}}, 422),  # text over the length limit
        ({"json": {"text": "x" * 1_000_000}}, 413),  # 1 MB body
        (
            {
                "content": b"text=hi",
                "headers": {"content-type": "application/x-www-form-urlencoded"},
            },
            415,
        ),
        ({"json": {"requests": []}}, 422),
        ({"json": {"text": "hi", "surprise": 1}}, 422),
        ({"json": [1, 2, 3]}, 422),
    ],
)
def test_bad_input_is_a_4xx_with_a_reason(server, kwargs, status) -> None:
    _, client, *_ = server
    r = client.post("/v1/route", **kwargs)
    assert r.status_code == status, r.text
    assert r.json()["error"]
    assert client.get("/healthz").json()["status"] == "ok"  # still alive


def test_feedback_is_appended_as_valid_route_events(server) -> None:
    _, client, _, _, fb = server
    body = {
        "request": {"text": "把这张图做成视频", "attachments": ["image"]},
        "proposed": ["wan.image_to_video"],
        "final": ["wan.image_to_video", "audio.music"],
        "outcome": "rerouted",
        "creator": "c42",
        "session": "s9",
    }
    with cf.ThreadPoolExecutor(8) as pool:
        codes = list(
            pool.map(lambda _: client.post("/v1/feedback", json=body).status_code, range(24))
        )
    assert codes == [200] * 24
    bad = client.post("/v1/feedback", json={**body, "final": ["nope.step"]})
    assert bad.status_code == 422 and "nope.step" in bad.json()["error"]
    no_session = {k: v for k, v in body.items() if k != "session"}
    assert client.post("/v1/feedback", json=no_session).status_code == 422
    differs = {**body, "outcome": "accepted"}
    assert client.post("/v1/feedback", json=differs).status_code == 422
    abandoned = {**body, "outcome": "abandoned", "final": None}
    assert client.post("/v1/feedback", json=abandoned).status_code == 200
    reader = LogReader([fb], catalog=CAT)
    events = [e.event for e in reader]
    assert reader.summary.invalid_count == 0
    assert reader.summary.valid == reader.summary.total_lines == len(events) >= 25
    assert {ev.outcome for ev in events} == {"rerouted", "abandoned"}


def test_health_metrics_and_openapi(server) -> None:
    _, client, *_ = server
    health = client.get("/healthz").json()
    assert health["status"] == "ok" and health["model_version"] in ("v-a", "v-b")
    metrics = client.get("/metrics").text
    assert 'studio_align_requests_total{method="POST",route="/v1/route",status="200"}' in metrics
    assert "studio_align_route_latency_seconds_bucket" in metrics
    assert "studio_align_batch_size_count" in metrics
    assert "studio_align_model_info{version=" in metrics
    spec = client.get("/openapi.json").json()
    assert {"/v1/route", "/v1/feedback", "/admin/reload"} <= set(spec["paths"])


def test_reload_swaps_model_without_failing_in_flight_requests(server) -> None:
    _, client, ck_a, ck_b, _ = server
    req = {"text": "make a music video from this picture", "attachments": ["image"]}

    def hammer(_: int) -> int:
        return client.post("/v1/route", json=req).status_code

    with cf.ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(hammer, i) for i in range(60)]
        r = client.post("/admin/reload", json={"checkpoint": str(ck_b)})
        codes = [f.result() for f in futures]
    assert r.status_code == 200, r.text
    assert r.json()["previous_version"] == "v-a" and r.json()["model_version"] == "v-b"
    assert codes == [200] * 60
    assert client.post("/v1/route", json=req).json()["model_version"] == "v-b"
    missing = client.post("/admin/reload", json={"checkpoint": str(ck_a.parent / "nope")})
    assert missing.status_code == 422 and "nope" not in missing.json()["error"]
    assert client.post("/v1/route", json=req).json()["model_version"] == "v-b"  # still serving
    assert 'studio_align_reload_failures_total{reason="load"} 1.0' in client.get("/metrics").text
