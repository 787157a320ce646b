"""schemathesis against the live server's OpenAPI schema, on loopback, bounded.

Checks: no 5xx, responses that match the documented schema, only documented status
codes and content types. The short run (default suite) drives the real app under real
uvicorn with the bounded protocol and a fake router, so it needs no compile; the long
run (`slow`) drives `studio-align serve router` on a tiny real checkpoint. The admin
token is set, so generated reloads are refused (401/403) rather than reloading.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from serving_helpers import TOKEN, ServerProcess, live_server, make_router_checkpoint, serve_config

CHECKS = ",".join(
    [
        "not_a_server_error",
        "response_schema_conformance",
        "status_code_conformance",
        "content_type_conformance",
    ]
)


def run_schemathesis(url: str, examples: int, out: Path, seed: int = 13) -> dict:
    """Run `st` on `url`/openapi.json; return its JSON report (asserting nothing)."""
    st = shutil.which("st", path=str(Path(sys.executable).parent)) or "st"
    report = out / "st.json"
    subprocess.run(
        [st, "run", f"{url}/openapi.json", "-n", str(examples), "-c", CHECKS, "--seed", str(seed),
         "--request-timeout", "30", "--report", "json", "--report-json-path", str(report)],
        capture_output=True, text=True, timeout=600, cwd=out,
    )  # fmt: skip
    return json.loads(report.read_text())


def assert_clean(report: dict) -> None:
    assert report["complete"], report["stop_reason"]
    assert report["failures"] == [] and report["errors"] == [], report["failures"]
    assert report["operations"]["tested"] >= 6
    assert report["test_cases"]["generated"] > 0
    print(f"schemathesis: {report['test_cases']['generated']} cases, 0 failures")


@pytest.fixture
def live_url(tmp_path: Path) -> Iterator[str]:
    with live_server(serve_config(tmp_path, admin_token=TOKEN)) as port:
        yield f"http://127.0.0.1:{port}"


def test_schemathesis_short(live_url: str, tmp_path: Path) -> None:
    assert_clean(run_schemathesis(live_url, 5, tmp_path))


@pytest.mark.slow
def test_schemathesis_real_server(tmp_path: Path) -> None:
    ck = make_router_checkpoint(tmp_path / "router", seed=0, version="fuzz")
    srv = ServerProcess(
        ck, tmp_path / "fb.jsonl", "--set", "max_batch=4", "--set", f"admin_token={TOKEN}"
    )
    try:
        srv.wait_healthy()
        assert_clean(run_schemathesis(srv.url, 100, tmp_path))
    finally:
        srv.stop()
