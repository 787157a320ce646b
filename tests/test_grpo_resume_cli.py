"""`studio-align train grpo`, killed by SIGKILL after a checkpoint and run again, ends bitwise
equal to an uninterrupted run: parameters and every non-timing metric.

The kill rides on the public `studio_align_on_checkpoint` hook (the test plugin
`tests/plugins/kill_at_step.py`, loaded through `STUDIO_ALIGN_PLUGINS`), so the CLI and
the trainer run exactly as a user runs them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_route_workspace
from resume_cli import killed_and_resumed, train_cli

# minutes of CPU in subprocesses or training runs: opt-in (`pytest -m slow`), so the
# default suite stays under 15 minutes on 2 cores
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_route_workspace(tmp_path_factory.mktemp("grpo-resume"), train_creators=6)


def grpo_sets(ws: Path, run: str) -> dict:
    return {
        "run_dir": ws / run, "model.init_from": ws / "router", "data.dir": ws / "compiled",
        "train.steps": 4, "grpo.prompts_per_step": 4, "grpo.group_size": 4, "grpo.beta": 0.04,
        "checkpoint.every": 2, "optim.learning_rate": 3e-3,
    }  # fmt: skip


def test_killed_grpo_cli_run_resumes_bitwise(workspace: Path) -> None:
    out_a, out_b = killed_and_resumed(
        "grpo", workspace, lambda run: grpo_sets(workspace, run), kill_at=2
    )
    assert out_a["heldout_after"] == out_b["heldout_after"]


def test_finished_run_is_reported_and_resume_false_refuses(workspace: Path) -> None:
    again = train_cli("grpo", grpo_sets(workspace, "whole"), "--json")
    assert again.returncode == 0, again.stderr
    assert "holds a finished run (step 4 of 4)" in again.stderr
    ws = workspace
    refused = train_cli("grpo", {"run_dir": ws / "whole", "model.init_from": ws / "router",
                                 "data.dir": ws / "compiled", "checkpoint.resume": "false"})  # fmt: skip
    assert refused.returncode == 2
    assert "already holds a run" in refused.stderr and "Traceback" not in refused.stderr
