"""`studio-align train distill` (a router ensemble teacher, half the steps on the student's
own samples), killed by SIGKILL after a checkpoint and run again, ends bitwise equal to
an uninterrupted run; the resumed run reads the teacher cache the killed one wrote.

The kill rides on the public `studio_align_on_checkpoint` hook, as for GRPO and PPO.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import add_tiny_router, make_route_workspace
from resume_cli import killed_and_resumed

pytestmark = pytest.mark.slow  # three CLI runs in subprocesses


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from studio_align.router.ensemble import save_ensemble

    ws = make_route_workspace(tmp_path_factory.mktemp("distill-resume"), train_creators=6)
    add_tiny_router(ws, "router1", seed=1)
    save_ensemble([ws / "router", ws / "router1"], ws / "ens")
    return ws


def test_killed_distill_cli_run_resumes_bitwise(workspace: Path) -> None:
    def sets(run: str) -> dict:
        return {
            "run_dir": workspace / run, "model.init_from": workspace / "router",
            "data.dir": workspace / "compiled", "distill.teacher": workspace / "ens",
            "distill.on_policy_fraction": 0.5, "train.steps": 6, "train.batch_size": 8,
            "checkpoint.every": 3, "optim.learning_rate": 3e-3, "train.progress": "false",
            "train.log_every": 1,
        }  # fmt: skip

    out_a, out_b = killed_and_resumed("distill", workspace, sets, kill_at=3)
    assert out_b["resumed_from"] == 3 and out_b["teacher_cache_hit"] is True
    assert out_a["teacher_cache_hit"] is False
    assert (
        out_a["heldout_after"]["exact_plan_accuracy"]
        == out_b["heldout_after"]["exact_plan_accuracy"]
    )
