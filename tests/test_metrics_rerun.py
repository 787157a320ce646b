"""A killed run, rerun or resumed, leaves exactly one `metrics.jsonl` record per step.

The kill is an exception raised from inside the run (the batch source or the reward), the
in-process stand-in for SIGKILL: the records written before it stay on disk, plus a torn
fragment as a real kill mid-write would leave.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from flax import nnx

sys.path.insert(0, str(Path(__file__).parent))
from _training_worker import MLP, data, mse
from test_training_grpo import TARGET, Table, TablePolicy, run_config

from studio_align.config import validate
from studio_align.testing import toy
from studio_align.training.checkpoint import CheckpointConfig
from studio_align.training.grpo import GRPOConfig, GRPOStep, plugin_reward_fn
from studio_align.training.loop import TrainRunConfig, train_loop
from studio_align.training.optim import OptimConfig
from studio_align.training.supervised import supervised


class Killed(Exception):
    """Stands in for the process dying at a given step."""


def _steps(run_dir: Path, *, torn: bool = False) -> list[int]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    if torn:  # the kill's fragment is the last line
        assert lines[-1].startswith('{"run": "train", "st') and len(lines[-1]) < 25
        lines = lines[:-1]
    return [json.loads(x)["step"] for x in lines]


def _loop(run_dir: Path, every: int, kill_at: int | None) -> None:
    cfg = validate(
        TrainRunConfig,
        {
            "run_dir": str(run_dir),
            "train": {"steps": 6, "batch_size": 8, "log_every": 1, "progress": False,
                      "metrics_hook": False},
            "optim": {"name": "sgd", "learning_rate": 0.1, "decay": "constant"},
            "checkpoint": {"every": every, "async_save": False},
        },
    )  # fmt: skip
    arrays = data(48)

    def source(step: int) -> dict[str, np.ndarray]:
        if step == kill_at:
            with (run_dir / "metrics.jsonl").open("a") as f:
                f.write('{"run": "train", "st')  # torn by the kill
            raise Killed(step)
        return {k: v[step * 8 : step * 8 + 8] for k, v in arrays.items()}

    train_loop(MLP(16, 8, rngs=nnx.Rngs(0)), cfg, supervised(mse, source))


def test_loop_killed_before_first_checkpoint_then_rerun(tmp_path: Path) -> None:
    with pytest.raises(Killed):
        _loop(tmp_path, every=0, kill_at=3)  # steps 1-3 logged, nothing checkpointed
    assert _steps(tmp_path, torn=True) == [1, 2, 3]
    assert not (tmp_path / "checkpoints").exists() or not any((tmp_path / "checkpoints").iterdir())
    _loop(tmp_path, every=0, kill_at=None)  # a fresh start: the old records are gone
    assert _steps(tmp_path) == [1, 2, 3, 4, 5, 6]
    assert not list(tmp_path.glob(".metrics.jsonl*"))  # the rewrite left no temp file


def test_loop_killed_after_a_checkpoint_then_resumed(tmp_path: Path) -> None:
    with pytest.raises(Killed):
        _loop(tmp_path, every=2, kill_at=5)  # steps 1-5 logged, checkpoints at 2 and 4
    _loop(tmp_path, every=2, kill_at=None)  # resumes at 4: step 5 is logged again
    assert _steps(tmp_path) == [1, 2, 3, 4, 5, 6]


def _grpo(run_dir: Path, kill_at: int | None, checkpoint: CheckpointConfig | None) -> None:
    calls = 0
    inner = plugin_reward_fn([toy.pattern_reward(TARGET)])

    def reward(records, rollout):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        if calls == kill_at:
            raise Killed(calls)
        return inner(records, rollout)

    cfg = GRPOConfig(prompts_per_step=2, group_size=4, dynamic_sampling=False)
    step = GRPOStep(TablePolicy(4), [0, 1, 2, 3], reward, cfg)
    run = run_config(4, optim=OptimConfig(learning_rate=0.3, decay="constant"), run_dir=run_dir,
                     checkpoint=checkpoint)  # fmt: skip
    train_loop(Table(4, 8, rngs=nnx.Rngs(0)), run, step, name="grpo")


@pytest.mark.parametrize("checkpoint", [None, CheckpointConfig(every=0, async_save=False)])
def test_grpo_killed_before_first_checkpoint_then_rerun(tmp_path: Path, checkpoint) -> None:
    with pytest.raises(Killed):
        _grpo(tmp_path, kill_at=3, checkpoint=checkpoint)  # steps 1-2 logged
    assert _steps(tmp_path) == [1, 2]
    _grpo(tmp_path, kill_at=None, checkpoint=checkpoint)
    assert _steps(tmp_path) == [1, 2, 3, 4]
