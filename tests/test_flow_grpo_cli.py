"""`studio-align train grpo --task flow`: Flow-GRPO from compiled selection logs through
the generic GRPO command (tiny model, 8x8 images, two steps), with the KL reference the
trainer asks the task for."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from flow_helpers import selection_workspace

from studio_align.cli import main
from studio_align.verticals.flow.checkpoint import load_flow

pytestmark = pytest.mark.slow  # compiles the SDE rollout and the GRPO step: ~40 s of CPU


def test_train_grpo_task_flow_end_to_end(tmp_path):
    compiled = selection_workspace(tmp_path)
    cfg = tmp_path / "grpo.toml"
    cfg.write_text(
        f'task = "flow"\nrun_dir = "{tmp_path / "run"}"\n'
        "rewards = { flow_diversity = 1.0 }\n"
        f'[model]\ninit_from = "{tmp_path / "base"}"\noptions = {{ sde_steps = 2 }}\n'
        f'[data]\ndir = "{compiled}"\n'
        # 3 samples a group: a pair's diversity rewards are equal, so its advantages are 0
        "[grpo]\nprompts_per_step = 2\ngroup_size = 3\nbeta = 0.05\n"
        "[optim]\nlearning_rate = 1e-2\n"
        "[train]\nsteps = 2\nprogress = false\nmetrics_hook = false\n"
        "[checkpoint]\nevery = 0\n"
    )
    res = CliRunner().invoke(main, ["train", "grpo", "--config", str(cfg), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout[res.stdout.index("{") :])
    assert out["steps"] == 2 and np.isfinite(out["last_step"]["kl"])
    assert np.isfinite(out["reward_end"]) and "reward/flow_diversity/mean" in out["last_step"]
    assert "reward/flow_diversity/mean" in out["heldout_after"]  # held-out prompts sampled too
    model, meta = load_flow(tmp_path / "run" / "model")
    assert meta["trained_by"] == "grpo" and model.cfg.image_size == 8
    before, _ = load_flow(tmp_path / "base")
    assert not np.allclose(
        np.asarray(model.embed.kernel[...]), np.asarray(before.embed.kernel[...])
    )  # the weights moved


def test_train_ppo_task_flow_end_to_end(tmp_path):
    """`train ppo --task flow`: the value head reads the flow policy's pooled features."""
    compiled = selection_workspace(tmp_path)
    cfg = tmp_path / "ppo.toml"
    cfg.write_text(
        f'task = "flow"\nrun_dir = "{tmp_path / "run"}"\n'
        "rewards = { flow_diversity = 1.0 }\n"
        f'[model]\ninit_from = "{tmp_path / "base"}"\noptions = {{ sde_steps = 2 }}\n'
        f'[data]\ndir = "{compiled}"\n'
        "[ppo]\nrollouts = 2\nprompts_per_step = 2\nsamples = 2\nkl_coef = 0.05\n"
        "[optim]\nlearning_rate = 1e-2\n"
        "[train]\nprogress = false\nmetrics_hook = false\n"
        "[checkpoint]\nevery = 0\n"
    )
    res = CliRunner().invoke(main, ["train", "ppo", "--config", str(cfg), "--json"])
    assert res.exit_code == 0, res.output
    model, meta = load_flow(tmp_path / "run" / "model")
    assert meta["trained_by"] == "ppo" and model.cfg.image_size == 8
    before, _ = load_flow(tmp_path / "base")
    assert not np.allclose(
        np.asarray(model.embed.kernel[...]), np.asarray(before.embed.kernel[...])
    )  # the weights moved
