"""`train grading` resumes exactly: a run stopped after some GRPO steps and resumed ends
with the same policy, bit for bit, as the run that never stopped."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from flax import nnx

from studio_align.simulate.grading.platform import write_platform_demo
from studio_align.verticals.grading.model import GradingModel
from studio_align.verticals.grading.run_config import GradingRunConfig
from studio_align.verticals.grading.train import train_grading


def _cfg(run, logs, grpo_steps: int) -> GradingRunConfig:
    return GradingRunConfig.model_validate(
        {
            "run_dir": str(run),
            "logs": [str(logs)],
            "heldout_fraction": 0.3,
            "policy": {"thumbnail": 24, "hidden": 8},
            "bc": {"steps": 10, "batch_size": 8},
            "train": {"steps": grpo_steps},
            "grpo": {"prompts_per_step": 4, "group_size": 4},
            "reward": {"train": {"steps": 20}, "gate": {"min_heldout_accuracy": 0.0}},
            "checkpoint": {"every": 1, "async_save": False},
        }
    )


def _leaves(path):
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(GradingModel.load(path).policy))]


@pytest.mark.slow
def test_stopped_and_resumed_run_equals_the_uninterrupted_one(tmp_path):
    logs = write_platform_demo(tmp_path / "p", retouches=6, selections=6, ratings=2, size=24,
                               creators=["ana", "bo"])  # fmt: skip
    full = train_grading(_cfg(tmp_path / "full", logs, 4))
    train_grading(_cfg(tmp_path / "cut", logs, 2))  # "killed" after GRPO step 2
    resumed = train_grading(_cfg(tmp_path / "cut", logs, 4))
    assert resumed["stages"]["bc"]["resumed_from"] == 10  # BC restored, not retrained
    for a, b in zip(_leaves(full["model"]), _leaves(resumed["model"]), strict=True):
        np.testing.assert_array_equal(a, b)
