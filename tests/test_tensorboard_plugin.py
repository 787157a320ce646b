"""The opt-in TensorBoard plugin writes each logged scalar to RUN_DIR/tensorboard."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

pytest.importorskip("tensorboardX", reason="the tensorboard extra is not installed")

from tensorboardX.proto.event_pb2 import Event

from studio_align.plugins import PluginHost, using_host
from studio_align.plugins import tensorboard as tb
from studio_align.training.metrics import MetricsLogger


def _scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Read TFRecord event files (length, crc, payload, crc) without TensorFlow."""
    out: dict[str, list[tuple[int, float]]] = {}
    for f in sorted(folder.glob("events.out.tfevents.*")):
        data = f.read_bytes()
        i = 0
        while i < len(data):
            (n,) = struct.unpack("<Q", data[i : i + 8])
            ev = Event.FromString(data[i + 12 : i + 12 + n])
            i += 12 + n + 4
            for v in ev.summary.value:
                out.setdefault(v.tag, []).append((ev.step, v.simple_value))
    return out


def test_metrics_reach_tensorboard(tmp_path: Path) -> None:
    host = PluginHost()
    host.load_module("studio_align.plugins.tensorboard")
    with using_host(host):
        log = MetricsLogger(tmp_path, "sft")
        log.log(10, {"loss": 2.5, "lr": 1e-3, "note": "text", "nan": float("nan")})
        log.log(20, {"loss": 1.5, "lr": 1e-3})
    tb.close_all()
    scalars = _scalars(tmp_path / "tensorboard")
    assert scalars["sft/loss"] == [(10, 2.5), (20, 1.5)]
    assert "sft/note" not in scalars and "sft/nan" not in scalars and "sft/step" not in scalars
