"""`studio-align train ppo`, killed by SIGKILL after a checkpoint and run again, ends bitwise
equal to an uninterrupted run: parameters, every non-timing metric and held-out reward.

As for GRPO (`test_grpo_resume_cli.py`), the kill rides on the public
`studio_align_on_checkpoint` hook (`tests/plugins/kill_at_step.py`). PPO's loop counts
updates, so with 2 updates per rollout the checkpoint after rollout 2 is loop step 4.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_route_workspace

pytestmark = pytest.mark.slow  # three CLI runs in subprocesses: about a minute each on 2 cores

KILL_PLUGIN = Path(__file__).with_name("plugins") / "kill_at_step.py"
CLI = "from studio_align.cli import main; main()"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_route_workspace(tmp_path_factory.mktemp("ppo-resume"), train_creators=6)


def ppo(ws: Path, run: str, **env: str) -> subprocess.CompletedProcess[str]:
    sets = {
        "run_dir": ws / run, "model.init_from": ws / "router", "data.dir": ws / "compiled",
        "ppo.rollouts": 4, "ppo.prompts_per_step": 4, "ppo.samples": 2, "ppo.epochs": 2,
        "ppo.kl_coef": 0.05, "ppo.kl_target": 0.01, "ppo.kl_horizon": 10,
        "checkpoint.every": 2, "optim.learning_rate": 3e-3, "train.progress": "false",
    }  # fmt: skip
    args = [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    clean = ("STUDIO_ALIGN_PLUGINS", "KILL_AT_STEP")
    full_env = {k: v for k, v in os.environ.items() if k not in clean} | env
    return subprocess.run(
        [sys.executable, "-c", CLI, "train", "ppo", *args, "--json"],
        capture_output=True, text=True, env=full_env, timeout=900,
    )  # fmt: skip


def _metrics(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    drop = {"time", "steps_per_s", "examples_per_s"}
    return [
        {k: v for k, v in r.items() if not k.startswith("time/") and k not in drop} for r in rows
    ]


def test_killed_ppo_cli_run_resumes_bitwise(workspace: Path) -> None:
    whole = ppo(workspace, "whole")
    assert whole.returncode == 0, whole.stderr
    killed = ppo(workspace, "cut", STUDIO_ALIGN_PLUGINS=str(KILL_PLUGIN), KILL_AT_STEP="4")
    assert killed.returncode == -9, killed.stderr
    assert not (workspace / "cut" / "model").exists()  # it died mid-run
    resumed = ppo(workspace, "cut")
    assert resumed.returncode == 0, resumed.stderr
    out_a, out_b = json.loads(whole.stdout), json.loads(resumed.stdout)
    assert out_b["resumed_from"] == 4
    a = (workspace / "whole" / "model" / "params.safetensors").read_bytes()
    b = (workspace / "cut" / "model" / "params.safetensors").read_bytes()
    assert a == b
    m_a, m_b = _metrics(workspace / "whole"), _metrics(workspace / "cut")
    assert m_a == m_b
    coefs = [r["kl/coef"] for r in m_a]
    assert len(set(coefs)) > 1  # the adaptive coefficient moved, and resumed where it was
    assert out_a["heldout_after"] == out_b["heldout_after"]
    assert out_a["reward_calls"] == out_b["reward_calls"] == 4 * 4 * 2
