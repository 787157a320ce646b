"""The shipped router-SFT arena: every key it tunes or locks is a real `train sft` key."""

from __future__ import annotations

from pathlib import Path

import pytest

from studio_align.autotune import History, Space, make_proposer
from studio_align.config import load_config

EXAMPLE = Path(__file__).resolve().parents[1] / "examples/autotune/router_sft_space.toml"


def test_example_space_overrides_validate_against_the_sft_config(tmp_path):
    pytest.importorskip("jax")
    from studio_align.training.sft import SFTConfig

    space = Space.load(EXAMPLE)
    base = space.path(space.spec.command.base_config)
    assert space.spec.command.seed_key == "train.seed"
    proposer = make_proposer("sobol", space, tmp_path)
    history = History(baseline=space.baseline(), best=space.baseline())
    configs = [space.baseline()] + [proposer.propose(n, history).config for n in range(1, 17)]
    assert any(c["optim.name"] == "sgd" for c in configs)  # the conditional branch is seen
    for config in configs:
        sets = [*space.overrides(config, seed=3), f"run_dir={tmp_path}"]
        cfg = load_config(SFTConfig, base, sets)  # unknown keys or bad values raise here
        assert cfg.train.seed == 3 and cfg.train.steps == space.locked["train.steps"]
        assert cfg.optim.learning_rate == pytest.approx(config["optim.learning_rate"])
        if config["optim.name"] == "sgd":
            assert cfg.optim.momentum == pytest.approx(config["optim.momentum"])
