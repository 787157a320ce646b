"""A run that fills its disk stops with one line (exit 2); freed, it resumes and finishes.

Real ENOSPC on a tiny tmpfs (needs root to mount one, as in a container; skipped
otherwise): `train sft` checkpoints every step into the tmpfs, a test plugin fills the
disk right after the step-2 checkpoint (`tests/plugins/fill_disk_at_step.py`, through the
public `studio_align_on_checkpoint` hook), so the run's next write fails mid-run. The
filler is deleted and the same command, `checkpoint.resume = true`, continues from step 2
to the end: the newest checkpoint is the final step and restores, nothing half-written is
taken for the latest, and `metrics.jsonl` holds each step once.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from studio_align.errors import CheckpointError
from studio_align.router.data import write_jsonl
from studio_align.simulate.router.requests import generate_examples
from studio_align.training.checkpoint import Checkpointer

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "tests" / "plugins" / "fill_disk_at_step.py"
STEPS = 4


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root (as in a container)")
    d = tmp_path / "disk"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(d)],
                       capture_output=True, text=True)  # fmt: skip
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], capture_output=True)


def _train(cfg: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT), **env}
    environ.pop("STUDIO_ALIGN_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "studio_align", "train", "sft", "--config", str(cfg)],
        capture_output=True, text=True, timeout=900, cwd=cwd, env=environ,
    )  # fmt: skip


@pytest.mark.slow  # two CLI runs with a compile each
def test_full_disk_is_one_line_then_resume_finishes(tmp_path: Path, tmpfs: Path) -> None:
    train = write_jsonl(tmp_path / "train.jsonl", generate_examples(24, seed=0))
    held = write_jsonl(tmp_path / "held.jsonl", generate_examples(8, seed=1, split="heldout"))
    run_dir = tmpfs / "run"
    cfg = tmp_path / "run.toml"
    cfg.write_text(
        f'run_dir = "{run_dir}"\n[model]\npreset = "tiny"\nvocab_size = 300\n'
        f'[data]\ntrain = "{train}"\nheldout = "{held}"\n'
        f"[train]\nsteps = {STEPS}\nbatch_size = 4\nlog_every = 1\nprogress = false\n"
        "[checkpoint]\nevery = 1\nkeep = 2\nresume = true\n",
        encoding="utf-8",
    )
    full = _train(cfg, tmp_path, STUDIO_ALIGN_PLUGINS=str(PLUGIN), FILL_AT_STEP="2",
                  FILL_DIR=str(tmpfs))  # fmt: skip
    out = full.stdout + full.stderr
    assert "Traceback" not in out, out[-3000:]
    assert full.returncode == 2, out[-3000:]
    errors = [ln for ln in full.stderr.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1 and "No space left on device" in errors[0], full.stderr[-3000:]

    (tmpfs / "filler").unlink()  # space is freed
    resumed = _train(cfg, tmp_path)
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-3000:]
    assert "cannot restore" not in resumed.stderr  # the newest checkpoint was whole
    ck = Checkpointer(run_dir / "checkpoints", every=1, keep=2, async_save=False)
    assert ck.latest_step() == STEPS
    ck.close()
    assert not list((run_dir / "checkpoints").glob("*.corrupt"))
    steps = [json.loads(x)["step"] for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train_steps = [s for s in steps if s <= STEPS]
    assert sorted(set(train_steps)) == list(range(1, STEPS + 1))
    assert len([s for s in steps if s < STEPS]) == STEPS - 1  # steps 1-3 logged exactly once


def test_storage_errors_inside_orbax_become_the_os_error(tmp_path: Path) -> None:
    """tensorstore reports a full disk as a ValueError with the OS error in its text."""
    ck = Checkpointer(tmp_path / "ck", every=1, keep=1, async_save=False)
    full = ValueError("RESOURCE_EXHAUSTED: Failed writing: x: No space left on device "
                      "[os_error_code='28'] [tensorstore_spec='{...}']")  # fmt: skip
    with pytest.raises(OSError) as info, ck._storage_errors("saving step 3"):
        raise full
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(ck.directory)
    with pytest.raises(OSError) as info, ck._storage_errors("saving step 3"):
        raise ValueError("Error writing: Read-only file system")
    assert info.value.errno == errno.EROFS
    with (
        pytest.raises(CheckpointError, match=r"saving step 3 failed: boom"),
        ck._storage_errors("saving step 3"),
    ):
        raise RuntimeError("boom\nmore lines")
    ck.close()
