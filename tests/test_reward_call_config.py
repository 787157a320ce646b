"""`[reward_call]` in the run configs: the time-out a config sets is the one a reward call gets.

The path is the CLI's: TOML text and `--set` overrides through `load_config`, the plugin
rewards chosen by `train_grpo`'s own `run_rewards`, the trainer's `plugin_reward_fn`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from studio_align.config import load_config
from studio_align.errors import ConfigError, RewardError
from studio_align.plugins import PluginHost
from studio_align.rewards import DEFAULT_TIMEOUT_S, Reward, RewardCallConfig
from studio_align.training.grpo import plugin_reward_fn
from studio_align.training.grpo_run import GRPORunConfig, run_rewards
from studio_align.training.policy import Rollout

RELEASE = threading.Event()


def hang(completions):
    RELEASE.wait(60)
    return [1.0] * len(completions)


async def hang_async(completions):
    await asyncio.sleep(60)
    return [1.0] * len(completions)


def quick(completions):
    return [0.5] * len(completions)


class SleepyPlugin:
    def studio_align_register_rewards(self, register):
        register(hang, name="hang")
        register(hang_async, name="hang_async")
        register(quick, name="quick")
        register(Reward("own_limit", hang, timeout_s=0.15))  # the plugin's own time-out


@pytest.fixture
def sleepy() -> Iterator[PluginHost]:
    h = PluginHost()
    h.register(SleepyPlugin(), name="sleepy-plugin")
    RELEASE.clear()
    yield h
    RELEASE.set()  # let the abandoned reward thread end


def _rollout(n: int = 2) -> Rollout:
    mask = np.ones((n, 3), bool)
    return Rollout(
        batch={"tokens": np.zeros((n, 3), np.int32)},
        old_logps=np.zeros((n, 3), np.float32),
        mask=mask,
        lengths=np.full(n, 3),
        truncated=np.zeros(n, bool),
        columns={"completions": [[1, 2, 3]] * n},
    )


def _reward_fn(host: PluginHost, toml: str, tmp_path: Path, *sets: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "grpo.toml"
    path.write_text(toml)
    cfg = load_config(GRPORunConfig, path, sets)
    rewards = run_rewards(cfg, host)
    return plugin_reward_fn(rewards, cfg.rewards, call=cfg.reward_call)


@pytest.mark.parametrize("name", ["hang", "hang_async"])
def test_config_time_out_reaches_the_reward_call(sleepy, tmp_path, name) -> None:
    fn = _reward_fn(
        sleepy, f"[rewards]\n{name} = 1.0\nquick = 1.0\n[reward_call]\ntimeout_s = 0.2\n", tmp_path
    )
    with pytest.raises(
        RewardError, match=rf"'{name}' \(plugin sleepy-plugin\) timed out after 0\.2 s"
    ):
        fn([0, 1], _rollout())


def test_per_reward_limit_and_set_override(sleepy, tmp_path) -> None:
    toml = "[rewards]\nhang = 1.0\nquick = 1.0\n[reward_call]\nper_reward = { hang = 0.3 }\n"
    fn = _reward_fn(sleepy, toml, tmp_path)
    with pytest.raises(
        RewardError, match=r"'hang' \(plugin sleepy-plugin\) timed out after 0\.3 s"
    ):
        fn([0, 1], _rollout())
    fn = _reward_fn(sleepy, toml, tmp_path, "reward_call.per_reward.hang=0.25")
    with pytest.raises(RewardError, match=r"timed out after 0\.25 s"):
        fn([0, 1], _rollout())
    ok = _reward_fn(sleepy, "[rewards]\nquick = 1.0\n[reward_call]\ntimeout_s = 0.2\n", tmp_path)
    total, metrics = ok([0, 1], _rollout())
    assert total.tolist() == [0.5, 0.5] and metrics["reward/quick/mean"] == 0.5


def test_plugin_limit_survives_registration_and_config_wins(sleepy, tmp_path) -> None:
    toml = "[rewards]\nown_limit = 1.0\n[reward_call]\ntimeout_s = 60\n"
    with pytest.raises(
        RewardError, match=r"'own_limit' \(plugin sleepy-plugin\) timed out after 0\.15 s"
    ):
        _reward_fn(sleepy, toml, tmp_path)([0, 1], _rollout())
    fn = _reward_fn(sleepy, toml, tmp_path, "reward_call.per_reward.own_limit=0.2")
    with pytest.raises(RewardError, match=r"timed out after 0\.2 s"):
        fn([0, 1], _rollout())


def test_bad_reward_call_settings_are_config_errors(sleepy, tmp_path) -> None:
    with pytest.raises(
        ConfigError, match=r"reward_call\.per_reward: \['nope'\] not in \[rewards\]"
    ):
        _reward_fn(
            sleepy, "[rewards]\nquick = 1.0\n[reward_call.per_reward]\nnope = 1.0\n", tmp_path
        )
    with pytest.raises(ConfigError, match=r"reward_call\.timeout_s"):
        _reward_fn(sleepy, "[rewards]\nquick = 1.0\n[reward_call]\ntimeout_s = 0\n", tmp_path)
    assert GRPORunConfig().reward_call == RewardCallConfig()
    assert RewardCallConfig().timeout_s == DEFAULT_TIMEOUT_S == 60.0
