"""The verticals' run configs extend the shared `TrainRunConfig` (`[train]`, `[optim]`,
`[checkpoint]`, `[mesh]`, `[distributed]`); a key that moved there is one line naming
its new place."""

from __future__ import annotations

from pathlib import Path

import pytest

from studio_align.config import load_config, validate
from studio_align.errors import ConfigError
from studio_align.training.run_config import TrainRunConfig
from studio_align.verticals.flow.align import FlowGRPOConfig
from studio_align.verticals.grading.run_config import GradingRunConfig


def test_both_are_train_run_configs():
    assert issubclass(GradingRunConfig, TrainRunConfig) and issubclass(
        FlowGRPOConfig, TrainRunConfig
    )


@pytest.mark.parametrize(
    ("toml", "line"),
    [
        ('seed = 3\n', "grading.toml: `seed` moved to the shared [train] section: write train.seed = 3"),
        ("[grpo]\nsteps = 20\n", "grpo: `steps` moved to the shared [train] section: write train.steps = 20"),
        ("[grpo]\nlearning_rate = 0.01\n", "grpo: `learning_rate` moved to the shared [optim] section: write optim.learning_rate = 0.01"),
        ("[dpo]\nbatch_size = 8\n", "dpo: `batch_size` moved to the shared [train] section: write train.batch_size = 8"),
    ],
)  # fmt: skip
def test_an_old_grading_config_names_where_its_key_moved(tmp_path: Path, toml: str, line: str):
    path = tmp_path / "grading.toml"
    path.write_text(f'logs = ["logs"]\n{toml}')
    with pytest.raises(ConfigError) as e:
        load_config(GradingRunConfig, path)
    assert line in str(e.value) and "\n" not in str(e.value).strip()


def test_grading_tuned_stage_reads_train_and_optim():
    cfg = validate(GradingRunConfig, {"logs": ["x"], "algorithm": "dpo"})
    assert cfg.stage_steps == 200 and cfg.train.batch_size == 64 and cfg.optim.learning_rate == 1e-3
    cfg = validate(GradingRunConfig, {"logs": ["x"], "train": {"steps": 0, "seed": 4}})
    assert cfg.stage_steps == 0 and cfg.train.seed == 4
    assert validate(GradingRunConfig, {"logs": ["x"], "algorithm": "bc"}).stage_steps == 0
    with pytest.raises(ConfigError, match=r"train\.grad_accum does not apply to grading"):
        validate(GradingRunConfig, {"logs": ["x"], "train": {"grad_accum": 2, "batch_size": 64}})


def test_flow_grpo_config_runs_the_shared_loop_sections():
    cfg = validate(
        FlowGRPOConfig,
        {"train": {"steps": 5, "seed": 2}, "optim": {"name": "adam", "learning_rate": 1e-4,
                                                      "decay": "constant"}},
    )  # fmt: skip
    run = cfg.run("somewhere")
    assert run.run_dir == Path("somewhere") and run.train.steps == 5 and run.train.log_every == 1
    assert run.optim.learning_rate == 1e-4 and not run.checkpoint.enabled
    assert cfg.with_seed(7).train.seed == 7 and cfg.train.seed == 2
    for key, dest in (("steps", "train.steps"), ("seed", "train.seed"),
                      ("learning_rate", "optim.learning_rate")):  # fmt: skip
        with pytest.raises(ConfigError, match=f"`{key}` moved to .* write {dest} = 1"):
            validate(FlowGRPOConfig, {key: 1})


def test_every_built_in_task_start_takes_what_the_trainers_pass():
    """`train grpo|ppo` pass `reference=`, `train sft|distill` `records=`: a task whose
    `start` lacks one fails only when that trainer runs (as `train grpo --task flow` did)."""
    import inspect

    from studio_align.plugins import PluginHost

    host = PluginHost.default(entry_points=True)
    for name in ("router", "grading", "flow"):
        params = inspect.signature(host.task(name).start).parameters
        assert {"seed", "records", "reference"} <= set(params), (name, list(params))
