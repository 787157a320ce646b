"""GRPO's optax-style options: the adaptive KL controller and the running reward
normaliser, wired into the trainer without recompiles and saved for exact resume."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from flax import nnx
from test_training_grpo import TARGET, Table, TablePolicy, run_config

from studio_align.algorithms.kl_controller import adaptive_kl
from studio_align.testing import toy
from studio_align.training.checkpoint import CheckpointConfig
from studio_align.training.grpo import GRPOConfig, GRPOStep, plugin_reward_fn
from studio_align.training.loop import TrainResult, train_loop
from studio_align.training.optim import OptimConfig

# minutes of CPU in subprocesses or training runs: opt-in (`pytest -m slow`), so the
# default suite stays under 15 minutes on 2 cores
pytestmark = pytest.mark.slow


def _run(
    run_dir: Path | None = None, steps: int = 6, total: int | None = None, **cfg: object
) -> tuple[GRPOStep, TrainResult]:
    """6 table-policy steps (checkpointed every 3 under `run_dir`); `total`: stop early."""
    config = GRPOConfig(**{"prompts_per_step": 4, "group_size": 8, **cfg})  # type: ignore[arg-type]
    step = GRPOStep(
        TablePolicy(4), [0, 1, 2, 3], plugin_reward_fn([toy.pattern_reward(TARGET)]), config,
        ref_model=Table(4, 8, rngs=nnx.Rngs(0)),
    )  # fmt: skip
    ck = CheckpointConfig(every=3, async_save=False) if run_dir else None
    run = run_config(steps, optim=OptimConfig(learning_rate=0.3, decay="constant"),
                     run_dir=run_dir, checkpoint=ck)  # fmt: skip
    result = train_loop(Table(4, 8, rngs=nnx.Rngs(0)), run, step, name="grpo", total_steps=total)
    return step, result


def test_adaptive_kl_follows_the_controller_with_one_compile() -> None:
    t, res = _run(beta=0.5, kl_target=1e-4, kl_horizon=10)
    h = res.history
    betas = [m["kl/beta"] for m in h]
    assert betas[0] == pytest.approx(0.5)
    ctl, state = adaptive_kl(0.5, target=1e-4, horizon=10), None
    state = ctl.init()
    for m in h:  # the step's coefficient is the controller's, step by step
        assert m["kl/beta"] == pytest.approx(float(state.coef), rel=1e-6)
        state = ctl.update(state, np.float32(m["kl"]), 1)
    assert betas[-1] > betas[0]  # KL above a tiny target: the penalty grows
    assert t.compiles == 1


def test_reward_norm_standardises_across_steps_and_resumes(tmp_path: Path) -> None:
    opts = dict(estimator="dr_grpo", reward_norm=True, beta=0.1, kl_target=0.01)
    whole, res_a = _run(tmp_path / "a", **opts)
    ha = res_a.history
    assert whole.rollouts.norm_state is not None
    assert float(whole.rollouts.norm_state.n) == 6 * 4 * 8
    _run(tmp_path / "b", total=3, **opts)
    resumed, res_b = _run(tmp_path / "b", **opts)
    hb = res_b.history
    assert [m["loss"] for m in hb] == [m["loss"] for m in ha[3:]]
    assert resumed.kl_state is not None and whole.kl_state is not None
    assert float(resumed.kl_state.coef) == float(whole.kl_state.coef)
