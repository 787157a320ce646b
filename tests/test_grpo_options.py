"""GRPO's optax-style options: the adaptive KL controller and the running reward
normaliser, wired into the trainer without recompiles and saved for exact resume."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from flax import nnx
from test_training_grpo import TARGET, Table, TablePolicy

from studio_align.algorithms.kl_controller import adaptive_kl
from studio_align.testing import toy
from studio_align.training.checkpoint import CheckpointConfig
from studio_align.training.grpo import GRPOConfig, GRPOTrainer, plugin_reward_fn
from studio_align.training.optim import OptimConfig

# minutes of CPU in subprocesses or training runs: opt-in (`pytest -m slow`), so the
# default suite stays under 15 minutes on 2 cores
pytestmark = pytest.mark.slow


def _trainer(run_dir: Path | None = None, **cfg: object) -> GRPOTrainer:
    config = GRPOConfig(**{"steps": 6, "prompts_per_step": 4, "group_size": 8, "seed": 0, **cfg})
    return GRPOTrainer(
        TablePolicy(4), Table(4, 8, rngs=nnx.Rngs(0)), [0, 1, 2, 3],
        plugin_reward_fn([toy.pattern_reward(TARGET)]), config,
        OptimConfig(learning_rate=0.3, decay="constant"),
        ref_model=Table(4, 8, rngs=nnx.Rngs(0)), run_dir=run_dir,
        checkpoint=CheckpointConfig(every=3, async_save=False) if run_dir else None,
    )  # fmt: skip


def test_adaptive_kl_follows_the_controller_with_one_compile() -> None:
    t = _trainer(beta=0.5, kl_target=1e-4, kl_horizon=10)
    h = t.train().history
    betas = [m["kl/beta"] for m in h]
    assert betas[0] == pytest.approx(0.5)
    ctl, state = adaptive_kl(0.5, target=1e-4, horizon=10), None
    state = ctl.init()
    for m in h:  # the trainer's coefficient is the controller's, step by step
        assert m["kl/beta"] == pytest.approx(float(state.coef), rel=1e-6)
        state = ctl.update(state, np.float32(m["kl"]), 1)
    assert betas[-1] > betas[0]  # KL above a tiny target: the penalty grows
    assert t.compiles == 1


def test_reward_norm_standardises_across_steps_and_resumes(tmp_path: Path) -> None:
    whole = _trainer(
        tmp_path / "a", estimator="dr_grpo", reward_norm=True, beta=0.1, kl_target=0.01
    )
    ha = whole.train().history
    assert float(whole.norm_state.n) == 6 * 4 * 8
    part = _trainer(tmp_path / "b", estimator="dr_grpo", reward_norm=True, beta=0.1, kl_target=0.01)
    part.train(steps=3)
    resumed = _trainer(
        tmp_path / "b", estimator="dr_grpo", reward_norm=True, beta=0.1, kl_target=0.01
    )
    hb = resumed.train().history
    assert [m["loss"] for m in hb] == [m["loss"] for m in ha[3:]]
    assert float(resumed.kl_state.coef) == float(whole.kl_state.coef)
