"""`studio-align train grpo`, killed by SIGKILL after a checkpoint and run again, ends bitwise
equal to an uninterrupted run: parameters and every non-timing metric.

The kill rides on the public `studio_align_on_checkpoint` hook (the test plugin
`tests/plugins/kill_at_step.py`, loaded through `STUDIO_ALIGN_PLUGINS`), so the CLI and
the trainer run exactly as a user runs them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_route_workspace

# minutes of CPU in subprocesses or training runs: opt-in (`pytest -m slow`), so the
# default suite stays under 15 minutes on 2 cores
pytestmark = pytest.mark.slow

KILL_PLUGIN = Path(__file__).with_name("plugins") / "kill_at_step.py"
CLI = "from studio_align.cli import main; main()"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_route_workspace(tmp_path_factory.mktemp("grpo-resume"), train_creators=6)


def grpo(ws: Path, run: str, **env: str) -> subprocess.CompletedProcess[str]:
    sets = {
        "run_dir": ws / run, "model.init_from": ws / "router", "data.dir": ws / "compiled",
        "train.steps": 4, "grpo.prompts_per_step": 4, "grpo.group_size": 4, "grpo.beta": 0.04,
        "checkpoint.every": 2, "optim.learning_rate": 3e-3,
    }  # fmt: skip
    args = [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    clean = ("STUDIO_ALIGN_PLUGINS", "KILL_AT_STEP")
    full_env = {k: v for k, v in os.environ.items() if k not in clean} | env
    return subprocess.run(
        [sys.executable, "-c", CLI, "train", "grpo", *args, "--json"],
        capture_output=True, text=True, env=full_env, timeout=900,
    )  # fmt: skip


def _metrics(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    clocks = ("time", "steps_per_s", "examples_per_s")  # wall-clock figures differ run to run
    return [
        {k: v for k, v in r.items() if not k.startswith("time/") and k not in clocks} for r in rows
    ]


def test_killed_grpo_cli_run_resumes_bitwise(workspace: Path) -> None:
    whole = grpo(workspace, "whole")
    assert whole.returncode == 0, whole.stderr
    killed = grpo(workspace, "cut", STUDIO_ALIGN_PLUGINS=str(KILL_PLUGIN), KILL_AT_STEP="2")
    assert killed.returncode == -9, killed.stderr
    assert not (workspace / "cut" / "model").exists()  # it died mid-run
    resumed = grpo(workspace, "cut")
    assert resumed.returncode == 0, resumed.stderr
    a = (workspace / "whole" / "model" / "params.safetensors").read_bytes()
    b = (workspace / "cut" / "model" / "params.safetensors").read_bytes()
    assert a == b
    assert _metrics(workspace / "whole") == _metrics(workspace / "cut")
    out_a, out_b = json.loads(whole.stdout), json.loads(resumed.stdout)
    assert out_a["heldout_after"] == out_b["heldout_after"]


def test_finished_run_is_reported_and_resume_false_refuses(workspace: Path) -> None:
    again = grpo(workspace, "whole")
    assert again.returncode == 0, again.stderr
    assert "holds a finished run (step 4 of 4)" in again.stderr
    refused = subprocess.run(
        [sys.executable, "-c", CLI, "train", "grpo", "--set", f"run_dir={workspace / 'whole'}",
         "--set", f"model.init_from={workspace / 'router'}", "--set",
         f"data.dir={workspace / 'compiled'}", "--set", "checkpoint.resume=false"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "already holds a run" in refused.stderr and "Traceback" not in refused.stderr
