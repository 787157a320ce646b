"""`studio-align train grpo|ppo --task flow`: Flow-GRPO and PPO from compiled selection
logs through the generic commands (tiny model, 8x8 images, two steps or rollouts), with
the KL reference the trainer asks the task for."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from flow_helpers import selection_workspace

from studio_align.cli import main
from studio_align.verticals.flow.checkpoint import load_flow

pytestmark = pytest.mark.slow  # compiles the SDE rollout and the GRPO step: ~40 s of CPU


def _flow_run(tmp_path, trainer: str, section: str, train: str = "") -> dict:
    """`studio-align train TRAINER --task flow --json` on the tiny base's selections (2 SDE
    steps, the diversity reward), with `trainer`'s own `section` and `train` keys; its
    JSON output (the exit code asserted 0)."""
    compiled = selection_workspace(tmp_path)
    cfg = tmp_path / f"{trainer}.toml"
    cfg.write_text(
        f'task = "flow"\nrun_dir = "{tmp_path / "run"}"\n'
        "rewards = { flow_diversity = 1.0 }\n"
        f'[model]\ninit_from = "{tmp_path / "base"}"\noptions = {{ sde_steps = 2 }}\n'
        f'[data]\ndir = "{compiled}"\n{section}'
        "[optim]\nlearning_rate = 1e-2\n"
        f"[train]\n{train}progress = false\nmetrics_hook = false\n"
        "[checkpoint]\nevery = 0\n"
    )
    res = CliRunner().invoke(main, ["train", trainer, "--config", str(cfg), "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout[res.stdout.index("{") :])


def _trained_and_moved(tmp_path, trainer: str) -> None:
    """The run saved an 8x8 flow model trained by `trainer` whose weights left the base's."""
    model, meta = load_flow(tmp_path / "run" / "model")
    assert meta["trained_by"] == trainer and model.cfg.image_size == 8
    before, _ = load_flow(tmp_path / "base")
    assert not np.allclose(
        np.asarray(model.embed.kernel[...]), np.asarray(before.embed.kernel[...])
    )  # the weights moved


def test_train_grpo_task_flow_end_to_end(tmp_path):
    # 3 samples a group: a pair's diversity rewards are equal, so its advantages are 0
    out = _flow_run(tmp_path, "grpo", "[grpo]\nprompts_per_step = 2\ngroup_size = 3\nbeta = 0.05\n",
                    train="steps = 2\n")  # fmt: skip
    assert out["steps"] == 2 and np.isfinite(out["last_step"]["kl"])
    assert np.isfinite(out["reward_end"]) and "reward/flow_diversity/mean" in out["last_step"]
    assert "reward/flow_diversity/mean" in out["heldout_after"]  # held-out prompts sampled too
    _trained_and_moved(tmp_path, "grpo")


def test_train_ppo_task_flow_end_to_end(tmp_path):
    """`train ppo --task flow`: the value head reads the flow policy's pooled features."""
    _flow_run(
        tmp_path, "ppo", "[ppo]\nrollouts = 2\nprompts_per_step = 2\nsamples = 2\nkl_coef = 0.05\n"
    )
    _trained_and_moved(tmp_path, "ppo")
