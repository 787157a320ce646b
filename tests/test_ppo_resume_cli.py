"""`studio-align train ppo`, killed by SIGKILL after a checkpoint and run again, ends bitwise
equal to an uninterrupted run: parameters, every non-timing metric and held-out reward.

As for GRPO (`test_grpo_resume_cli.py`), the kill rides on the public
`studio_align_on_checkpoint` hook (`tests/plugins/kill_at_step.py`). PPO's loop counts
updates, so with 2 updates per rollout the checkpoint after rollout 2 is loop step 4.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_route_workspace
from resume_cli import killed_and_resumed, run_metrics

pytestmark = pytest.mark.slow  # three CLI runs in subprocesses: about a minute each on 2 cores


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_route_workspace(tmp_path_factory.mktemp("ppo-resume"), train_creators=6)


def test_killed_ppo_cli_run_resumes_bitwise(workspace: Path) -> None:
    def sets(run: str) -> dict:
        return {
            "run_dir": workspace / run, "model.init_from": workspace / "router",
            "data.dir": workspace / "compiled", "ppo.rollouts": 4, "ppo.prompts_per_step": 4,
            "ppo.samples": 2, "ppo.epochs": 2, "ppo.kl_coef": 0.05, "ppo.kl_target": 0.01,
            "ppo.kl_horizon": 10, "checkpoint.every": 2, "optim.learning_rate": 3e-3,
            "train.progress": "false",
        }  # fmt: skip

    out_a, out_b = killed_and_resumed("ppo", workspace, sets, kill_at=4)
    assert out_b["resumed_from"] == 4
    coefs = [r["kl/coef"] for r in run_metrics(workspace / "whole")]
    assert len(set(coefs)) > 1  # the adaptive coefficient moved, and resumed where it was
    assert out_a["heldout_after"] == out_b["heldout_after"]
    assert out_a["reward_calls"] == out_b["reward_calls"] == 4 * 4 * 2
