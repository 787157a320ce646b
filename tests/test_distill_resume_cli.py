"""`studio-align train distill` (a router ensemble teacher, half the steps on the student's
own samples), killed by SIGKILL after a checkpoint and run again, ends bitwise equal to
an uninterrupted run; the resumed run reads the teacher cache the killed one wrote.

The kill rides on the public `studio_align_on_checkpoint` hook, as for GRPO and PPO.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_route_workspace

pytestmark = pytest.mark.slow  # three CLI runs in subprocesses

KILL_PLUGIN = Path(__file__).with_name("plugins") / "kill_at_step.py"
CLI = "from studio_align.cli import main; main()"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from flax import nnx

    from studio_align.models.config import ModelConfig
    from studio_align.models.transformer import Transformer
    from studio_align.router.ensemble import save_ensemble
    from studio_align.router.router import Router, save_router

    ws = make_route_workspace(tmp_path_factory.mktemp("distill-resume"), train_creators=6)
    r = Router.load(ws / "router")
    other = Transformer(ModelConfig.tiny(r.tokenizer.vocab_size), rngs=nnx.Rngs(1))
    save_router(ws / "router1", other, r.tokenizer, r.catalog, max_steps=3)
    save_ensemble([ws / "router", ws / "router1"], ws / "ens")
    return ws


def distill(ws: Path, run: str, **env: str) -> subprocess.CompletedProcess[str]:
    sets = {
        "run_dir": ws / run, "model.init_from": ws / "router", "data.dir": ws / "compiled",
        "distill.teacher": ws / "ens", "distill.on_policy_fraction": 0.5, "train.steps": 6,
        "train.batch_size": 8, "checkpoint.every": 3, "optim.learning_rate": 3e-3,
        "train.progress": "false", "train.log_every": 1,
    }  # fmt: skip
    args = [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    clean = ("STUDIO_ALIGN_PLUGINS", "KILL_AT_STEP")
    full_env = {k: v for k, v in os.environ.items() if k not in clean} | env
    return subprocess.run(
        [sys.executable, "-c", CLI, "train", "distill", *args, "--json"],
        capture_output=True, text=True, env=full_env, timeout=900,
    )  # fmt: skip


def _metrics(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    drop = {"time", "steps_per_s", "examples_per_s"}
    return [
        {k: v for k, v in r.items() if not k.startswith("time/") and k not in drop} for r in rows
    ]


def test_killed_distill_cli_run_resumes_bitwise(workspace: Path) -> None:
    whole = distill(workspace, "whole")
    assert whole.returncode == 0, whole.stderr
    killed = distill(workspace, "cut", STUDIO_ALIGN_PLUGINS=str(KILL_PLUGIN), KILL_AT_STEP="3")
    assert killed.returncode == -9, killed.stderr
    assert not (workspace / "cut" / "model").exists()
    resumed = distill(workspace, "cut")
    assert resumed.returncode == 0, resumed.stderr
    out_a, out_b = json.loads(whole.stdout), json.loads(resumed.stdout)
    assert out_b["resumed_from"] == 3 and out_b["teacher_cache_hit"] is True
    assert out_a["teacher_cache_hit"] is False
    a = (workspace / "whole" / "model" / "params.safetensors").read_bytes()
    b = (workspace / "cut" / "model" / "params.safetensors").read_bytes()
    assert a == b
    assert _metrics(workspace / "whole") == _metrics(workspace / "cut")
    assert (
        out_a["heldout_after"]["exact_plan_accuracy"]
        == out_b["heldout_after"]["exact_plan_accuracy"]
    )
