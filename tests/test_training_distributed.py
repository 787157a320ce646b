"""Sharding equivalence and exact resume, each in fresh subprocesses.

XLA's host device count must be set before jax is imported, so every run is a
subprocess of `_training_worker.py` (a tiny MLP trained with `train_loop`).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import cpu8_env

# minutes of CPU in subprocesses or training runs: opt-in (`pytest -m slow`), so the
# default suite stays under 15 minutes on 2 cores
pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("_training_worker.py")
KILL_PLUGIN = Path(__file__).with_name("plugins") / "kill_at_step.py"


def _run(run_dir: Path, out: Path, *sets: str, devices: int = 1, env: dict | None = None) -> int:
    e = cpu8_env(devices, **(env or {}))
    args = [sys.executable, str(WORKER), str(run_dir), str(out)]
    for s in sets:
        args += [s] if s.startswith("--") else ["--set", s]
    proc = subprocess.run(args, env=e, capture_output=True, text=True, timeout=120)
    if proc.returncode not in (0, -9):
        raise AssertionError(f"worker failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.returncode


def _params(d: np.lib.npyio.NpzFile) -> dict[str, np.ndarray]:
    return {k: d[k] for k in d.files if k.startswith("p/")}


def _one_and_eight(tmp_path: Path, both: list[str], eight_only: list[str]) -> tuple[Any, Any]:
    """The Transformer SFT worker's outputs on one device and on eight."""
    _run(tmp_path / "one", tmp_path / "one.npz", "--transformer", *both, devices=1)
    _run(tmp_path / "eight", tmp_path / "eight.npz", "--transformer", *both, *eight_only,
         devices=8)  # fmt: skip
    return np.load(tmp_path / "one.npz"), np.load(tmp_path / "eight.npz")


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> np.lib.npyio.NpzFile:
    tmp = tmp_path_factory.mktemp("single")
    _run(tmp / "run", tmp / "out.npz")
    return np.load(tmp / "out.npz")


@pytest.mark.parametrize(("data", "fsdp"), [(8, 1), (2, 4)], ids=["data8", "data2-fsdp4"])
def test_eight_devices_match_one(
    tmp_path: Path, single: np.lib.npyio.NpzFile, data: int, fsdp: int
) -> None:
    _run(
        tmp_path / "run", tmp_path / "out.npz", f"mesh.data={data}", f"mesh.fsdp={fsdp}", devices=8
    )
    multi = np.load(tmp_path / "out.npz")
    assert int(multi["devices"]) == 8 and int(single["devices"]) == 1
    assert int(multi["compiles"]) == 1
    np.testing.assert_allclose(multi["losses"], single["losses"], rtol=1e-5, atol=1e-6)
    for k, v in _params(single).items():
        np.testing.assert_allclose(multi[k], v, rtol=1e-5, atol=1e-6, err_msg=k)
    if fsdp > 1:  # the hidden kernel really is split over the fsdp axis
        assert "fsdp" in str(multi["s/l2/kernel"])
    else:
        assert "fsdp" not in str(multi["s/l2/kernel"])


def test_killed_run_resumes_exactly(tmp_path: Path, single: np.lib.npyio.NpzFile) -> None:
    run = tmp_path / "run"
    rc = _run(
        run,
        tmp_path / "killed.npz",
        env={"STUDIO_ALIGN_PLUGINS": str(KILL_PLUGIN), "KILL_AT_STEP": "8"},
    )
    assert rc == -9 and not (tmp_path / "killed.npz").exists()
    assert sorted(int(p.name) for p in (run / "checkpoints").iterdir() if p.name.isdigit()) == [
        4,
        8,
    ]
    _run(run, tmp_path / "resumed.npz")
    resumed = np.load(tmp_path / "resumed.npz")
    assert list(resumed["steps"]) == [9, 10, 11, 12]  # only the remaining steps ran
    np.testing.assert_array_equal(resumed["losses"], single["losses"][8:])
    for k, v in _params(single).items():
        np.testing.assert_array_equal(resumed[k], v, err_msg=k)
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 12  # the file reads as one uninterrupted run


@pytest.mark.slow  # two Transformer compiles in subprocesses: ~10 s CPU, more on a busy box
def test_transformer_sft_on_fsdp_mesh_matches_one_device(tmp_path: Path) -> None:
    """The engine's Transformer with the SFT loss: logical-axis sharding (embed -> fsdp)."""
    one, eight = _one_and_eight(tmp_path, ["train.steps=6"], ["mesh.data=2", "mesh.fsdp=4"])
    assert int(eight["compiles"]) == 1
    np.testing.assert_allclose(eight["losses"], one["losses"], rtol=1e-5, atol=1e-6)
    assert one["losses"][-1] < one["losses"][0]
    for k, v in _params(one).items():
        np.testing.assert_allclose(eight[k], v, rtol=1e-5, atol=1e-6, err_msg=k)
    assert str(eight["s/embed_tokens/embedding"]) == "P(None, 'fsdp')"
    assert str(eight["s/layers/0/mlp/gate_proj/kernel"]) == "P('fsdp', None)"


@pytest.mark.slow  # two Transformer compiles in subprocesses
def test_packed_sft_on_eight_devices_with_accumulation_matches_plain_one_device(
    tmp_path: Path,
) -> None:
    """Packed rows (`training/packed.py`) split over a data mesh, two micro-batches each
    packed alone: the same losses and weights as plain rows on one device."""
    one, eight = _one_and_eight(tmp_path, ["train.steps=4"], ["--packed", "train.grad_accum=2"])
    np.testing.assert_allclose(eight["losses"], one["losses"], rtol=1e-5, atol=1e-6)
    for k, v in _params(one).items():
        np.testing.assert_allclose(eight[k], v, rtol=1e-4, atol=1e-6, err_msg=k)


@pytest.mark.slow  # two Transformer compiles in subprocesses
def test_transformer_sft_with_tensor_parallelism_matches_one_device(tmp_path: Path) -> None:
    """FSDP over 4 devices and tensor parallelism over 2 (heads, MLP, vocabulary split)."""
    one, eight = _one_and_eight(
        tmp_path, ["train.steps=6"], ["mesh.data=1", "mesh.fsdp=4", "mesh.model=2"]
    )
    assert int(eight["compiles"]) == 1
    np.testing.assert_allclose(eight["losses"], one["losses"], rtol=1e-5, atol=1e-6)
    for k, v in _params(one).items():
        np.testing.assert_allclose(eight[k], v, rtol=1e-5, atol=1e-6, err_msg=k)
    assert str(eight["s/embed_tokens/embedding"]) == "P('model', 'fsdp')"
    assert str(eight["s/layers/0/mlp/gate_proj/kernel"]) == "P('fsdp', 'model')"
    assert str(eight["s/layers/0/self_attn/q_proj/kernel"]) == "P('fsdp', 'model')"
