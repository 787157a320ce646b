"""`studio-align train dpo|kto|grpo` end to end on compiled demo creator logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import make_route_workspace

from studio_align.cli import main


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Compiled route logs of simulated creators and a tiny (untrained) router checkpoint."""
    return make_route_workspace(tmp_path_factory.mktemp("pref"))


def _run(args: list[str]) -> dict:
    res = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _common(ws: Path, run: str) -> list[str]:
    return [
        "--set", f"run_dir={ws / run}",
        "--set", f"model.init_from={ws / 'router'}",
        "--set", f"data.dir={ws / 'compiled'}",
    ]  # fmt: skip


@pytest.mark.slow
def test_train_dpo_cli_and_reference_cache(workspace: Path) -> None:
    from studio_align.router.router import Router

    cache = workspace / "dpo_cache"
    args = ["train", "dpo", *_common(workspace, "dpo1"), "--set", f"dpo.cache_dir={cache}",
            "--set", "train.steps=6", "--set", "train.batch_size=8", "--set", "optim.learning_rate=3e-3"]  # fmt: skip
    out = _run(args)
    assert out["reference_cache_hit"] is False
    assert 0.0 <= out["heldout_after"]["accuracy"] <= 1.0
    assert "rewards/accuracy" in out["train"]
    router = Router.load(out["checkpoint"])
    plans, _ = router.route([{"text": "make a video", "attachments": ["image"]}])
    assert plans and plans[0]
    again = _run([*args, "--set", f"run_dir={workspace / 'dpo2'}"])  # later --set wins
    assert again["reference_cache_hit"] is True


@pytest.mark.slow  # over 10 s; the default suite stays under 15 minutes on 2 cores
def test_train_kto_cli(workspace: Path) -> None:
    out = _run(["train", "kto", *_common(workspace, "kto"), "--set", "train.steps=4",
                "--set", "train.batch_size=8"])  # fmt: skip
    assert out["desirable_weight"] > 0
    assert "kl" in out["train"]


@pytest.mark.slow
def test_train_grpo_cli(workspace: Path) -> None:
    out = _run(["train", "grpo", *_common(workspace, "grpo"), "--set", "train.steps=2",
                "--set", "grpo.prompts_per_step=2", "--set", "grpo.group_size=4",
                "--set", "grpo.beta=0.04"])  # fmt: skip
    last = out["last_step"]
    for key in ("reward/intent_accuracy/mean", "reward/plan_validity/mean", "kl",
                "clip_fraction", "entropy", "zero_std_fraction"):  # fmt: skip
        assert key in last, key
    # constrained decoding: every sampled plan is valid
    assert last["reward/plan_validity/mean"] == 1.0
    assert (workspace / "grpo" / "metrics.jsonl").exists()


def test_unknown_reward_is_a_config_error(workspace: Path) -> None:
    res = CliRunner().invoke(
        main, ["train", "grpo", *_common(workspace, "bad"), "--set", "rewards.nope=1.0"]
    )
    assert res.exit_code != 0
    assert "nope" in res.output
