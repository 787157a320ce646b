"""`bench/compare.py` picks the peer harness's dims file as the harness does (`PEER_DIMS`)."""

from __future__ import annotations

from pathlib import Path

from bench_helpers import load_bench


def _compare():  # type: ignore[no-untyped-def]
    return load_bench("compare")


def test_peer_dims_selects_the_harness_file() -> None:
    c = _compare()
    assert c.dims_path({}) == c.PEERS / "dims.json"
    assert c.dims_path({"PEER_DIMS": "dims_large"}) == c.PEERS / "dims_large.json"
    assert c.dims_path({"PEER_DIMS": "dims_large.json"}) == c.PEERS / "dims_large.json"
    assert c.dims_path({"PEER_DIMS": "/x/my.json"}) == Path("/x/my.json")
