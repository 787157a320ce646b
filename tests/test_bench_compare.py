"""`bench/compare.py` picks the peer harness's dims file as the harness does (`PEER_DIMS`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "compare.py"


def _compare():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_compare", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_peer_dims_selects_the_harness_file() -> None:
    c = _compare()
    assert c.dims_path({}) == c.PEERS / "dims.json"
    assert c.dims_path({"PEER_DIMS": "dims_large"}) == c.PEERS / "dims_large.json"
    assert c.dims_path({"PEER_DIMS": "dims_large.json"}) == c.PEERS / "dims_large.json"
    assert c.dims_path({"PEER_DIMS": "/x/my.json"}) == Path("/x/my.json")
