"""Weight interpolation between two bundles of one model (WiSE-FT mixing, quickstart's
`tuned_weight`): exact arithmetic, the tuned bundle's other files kept, mismatches refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file
from serving_helpers import make_router_checkpoint

from studio_align.errors import CheckpointError
from studio_align.models.interpolate import interpolate_bundles
from studio_align.router.router import Router


def test_interpolation_is_exact_and_loads(tmp_path: Path) -> None:
    a = make_router_checkpoint(tmp_path / "a", seed=0, version="a")
    b = make_router_checkpoint(tmp_path / "b", seed=1, version="b")
    out = interpolate_bundles(a, b, weight=0.25, out=tmp_path / "m")
    ta, tb, tm = (load_file(str(d / "params.safetensors")) for d in (a, b, out))
    assert set(tm) == set(tb)
    for k in tm:
        np.testing.assert_allclose(tm[k], 0.75 * ta[k] + 0.25 * tb[k], rtol=1e-6, atol=1e-7)
    assert (out / "router.json").read_text() == (b / "router.json").read_text()
    Router.load(out)  # a loadable router
    same = interpolate_bundles(a, b, weight=1.0, out=tmp_path / "same")
    tsame = load_file(str(same / "params.safetensors"))
    assert all(np.array_equal(tsame[k], tb[k]) for k in tb)


def test_mismatches_are_refused(tmp_path: Path) -> None:
    a = make_router_checkpoint(tmp_path / "a", seed=0, version="a")
    b = make_router_checkpoint(tmp_path / "b", seed=1, version="b")
    with pytest.raises(CheckpointError, match="must be in"):
        interpolate_bundles(a, b, weight=1.5, out=tmp_path / "m")
    t = load_file(str(b / "params.safetensors"))
    k = next(iter(t))
    t[k] = np.zeros((3, 3), t[k].dtype)
    save_file(t, str(b / "params.safetensors"))
    with pytest.raises(CheckpointError, match="shape"):
        interpolate_bundles(a, b, weight=0.5, out=tmp_path / "m")
    (b / "params.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match="cannot read"):
        interpolate_bundles(a, b, weight=0.5, out=tmp_path / "m")
