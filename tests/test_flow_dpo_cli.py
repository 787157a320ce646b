"""`studio-align train dpo --task flow`: Diffusion-DPO from compiled selection logs through
the generic DPO command (tiny model, 8x8 images, a few steps)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from flow_helpers import selection_workspace

from studio_align.cli import main
from studio_align.verticals.flow.checkpoint import load_flow

pytestmark = pytest.mark.slow  # compiles the DiT step: ~20 s of CPU


def _workspace(tmp_path, options='creator = "lumen"'):
    compiled = selection_workspace(tmp_path)
    cfg = tmp_path / "dpo.toml"
    cfg.write_text(
        f'task = "flow"\nrun_dir = "{tmp_path / "run"}"\n'
        f'[model]\ninit_from = "{tmp_path / "base"}"\noptions = {{ {options} }}\n'
        f'[data]\ndir = "{compiled}"\n[dpo]\nbeta = 2000.0\n'
        "[train]\nsteps = 3\nbatch_size = 4\nprogress = false\nmetrics_hook = false\n"
        "[checkpoint]\nevery = 0\n"
    )
    return cfg


def test_train_dpo_task_flow_from_selection_logs(tmp_path):
    cfg = _workspace(tmp_path, 'creator = "lumen", dpo_anchor = 100.0')
    res = CliRunner().invoke(main, ["train", "dpo", "--config", str(cfg), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout[res.stdout.index("{") :])
    assert out["steps"] == 3 and np.isfinite(out["train"]["loss"])
    assert (
        "anchor" in out["train"]
    )  # the velocity anchor is in the loss (its effect: test_flow_model_protocol)
    assert "accuracy" in out["heldout_before"] and "accuracy" in out["heldout_after"]
    model, meta = load_flow(tmp_path / "run" / "model")
    assert meta["trained_by"] == "dpo:flow" and model.cfg.image_size == 8
    before, _ = load_flow(tmp_path / "base")
    a = np.asarray(model.embed.kernel[...])
    assert not np.allclose(a, np.asarray(before.embed.kernel[...]))  # the weights moved


def test_train_dpo_task_flow_rejects_a_token_loss_in_one_line(tmp_path):
    cfg = _workspace(tmp_path)
    args = ["train", "dpo", "--config", str(cfg), "--set", 'dpo.loss_type="ipo"']
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, res.output
    assert "dpo.loss_type" in res.output and "Traceback" not in res.output
    assert len([ln for ln in res.output.splitlines() if ln.strip()]) == 1


def test_train_dpo_task_flow_names_a_bad_anchor_in_one_line(tmp_path):
    cfg = _workspace(tmp_path, 'dpo_anchor = "strong"')
    res = CliRunner().invoke(main, ["train", "dpo", "--config", str(cfg)])
    assert res.exit_code == 2, res.output
    assert "model.options.dpo_anchor" in res.output and "Traceback" not in res.output
    assert len([ln for ln in res.output.splitlines() if ln.strip()]) == 1
