"""The feedback loop end to end: serve -> feedback -> data compile -> DPO -> reload.

A creator re-routes the served plan for a request; the server appends those route events;
`data compile` turns the log into DPO pairs; `train dpo` tunes the served checkpoint on
them; `/admin/reload` swaps the tuned model in, and the served plan for that request is
now the creator's. Real server, real HTTP, real CLI subprocesses, real checkpoints.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from serving_helpers import ServerProcess, make_router_checkpoint

from studio_align.catalog import default_catalog

REQUEST = {"text": "turn this photo of my cat into a short clip", "attachments": ["image"]}


def _cli(*args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "studio_align", *args], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, f"{args}: {out.stdout}\n{out.stderr}"
    return out.stdout


def _preferred(plan: list[str]) -> list[str]:
    """A different valid plan for an image request (what the creator really wants)."""
    cat = default_catalog()
    for cand in (["wan.image_to_video", "audio.music"], ["grading.film"], ["ideogram.edit_image"]):
        if cand != plan and cat.is_valid(cand, ["image"]):
            return cand
    raise AssertionError("no alternative plan")


@pytest.mark.slow
def test_feedback_dpo_reload_changes_the_served_plan(tmp_path: Path) -> None:
    ck = make_router_checkpoint(tmp_path / "router-v1", seed=0, version="v1")
    fb = tmp_path / "feedback.jsonl"
    srv = ServerProcess(ck, fb, "--set", "max_batch=4")
    try:
        srv.wait_healthy()
        with httpx.Client(base_url=srv.url, timeout=120) as client:
            served = client.post("/v1/route", json=REQUEST).json()["plan"]
            wanted = _preferred(served)
            for i in range(16):  # several creators and sessions re-route it the same way
                r = client.post(
                    "/v1/feedback",
                    json={
                        "request": REQUEST,
                        "proposed": served,
                        "final": wanted,
                        "outcome": "rerouted",
                        "creator": f"c{i % 4}",
                        "session": f"s{i}",
                    },
                )
                assert r.status_code == 200, r.text

            compiled = tmp_path / "compiled"
            _cli("data", "compile", str(fb), "--out", str(compiled), "--heldout-fraction", "0")
            run = tmp_path / "dpo"
            cfg = tmp_path / "dpo.toml"
            cfg.write_text(
                f'run_dir = "{run}"\n[model]\ninit_from = "{ck}"\n[data]\ndir = "{compiled}"\n'
                "[dpo]\nbeta = 0.1\n[train]\nsteps = 40\nbatch_size = 8\nprogress = false\n"
                "[optim]\nlearning_rate = 3e-3\n"
            )
            _cli("train", "dpo", "--config", str(cfg))

            r = client.post("/admin/reload", json={"checkpoint": str(run / "model")})
            assert r.status_code == 200, r.text
            after = client.post("/v1/route", json=REQUEST).json()
            assert after["model_version"] != "v1"
            assert after["plan"] == wanted, (served, wanted, after)
    finally:
        srv.stop()
