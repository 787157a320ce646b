"""A checkpoint whose float weights were stored as integers is refused at load (before,
they were cast silently, passed the health probe and were swapped in)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file
from serving_helpers import make_router_checkpoint

from studio_align.errors import CheckpointError
from studio_align.router.router import Router


def test_int32_weights_are_refused(tmp_path: Path) -> None:
    ck = make_router_checkpoint(tmp_path / "r", seed=0, version="v")
    t = load_file(str(ck / "params.safetensors"))
    name = next(k for k, v in t.items() if v.dtype.kind == "f")
    save_file({**t, name: t[name].astype(np.int32)}, str(ck / "params.safetensors"))
    with pytest.raises(CheckpointError, match=rf"{name} is int32, the model needs float32"):
        Router.load(ck)
