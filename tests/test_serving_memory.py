"""The server's exemplar memory: feedback becomes an exemplar, the creator's next request
uses it, other creators do not, and the memory is saved beside the checkpoint on stop."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from serving_helpers import make_router_checkpoint

from studio_align.router.router import Router
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
    )  # fmt: skip
    with TestClient(create_app(cfg)) as client:
        _ready(client)
        first = client.post("/v1/route", json={**REQ, "creator": "ana"}).json()
        assert first["source"] == "model"
        # a plan the untrained router did not give: the creator re-routed to it
        final = (
            ["wan.image_to_video", "audio.music"]
            if first["plan"] != ["wan.image_to_video", "audio.music"]
            else ["wan.image_to_video"]
        )
        fb = {"request": REQ, "proposed": first["plan"], "final": final,
              "outcome": "rerouted", "creator": "ana", "session": "s1"}  # fmt: skip
        assert client.post("/v1/feedback", json=fb).status_code == 200
        again = client.post("/v1/route", json={**REQ, "creator": "ana"}).json()
        assert again["source"] == "creator_memory"
        assert again["plan"] == final and again["abstain"] is False
        other = client.post("/v1/route", json={**REQ, "creator": "bo"}).json()
        assert other["source"] == "model"  # one exemplar of another creator: no population vote
        assert other["plan"] == first["plan"]
        # abandoned feedback teaches nothing
        gone = {**fb, "outcome": "abandoned", "final": None, "session": "s2", "creator": "bo"}
        assert client.post("/v1/feedback", json=gone).status_code == 200
    memory = Router.load(ck).memory
    assert memory is not None and len(memory) == 1  # saved on stop, reloaded with the model
