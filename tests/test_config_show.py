"""Config keys from the pydantic models: `describe_keys`, `commented_toml`, `config show`,
and the key listing of `train KIND --help`."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

import pytest
from click.testing import CliRunner
from pydantic import Field

from studio_align.cli import main
from studio_align.cli.config_cmd import RUN_CONFIGS, run_config_class
from studio_align.config import Strict, commented_toml, describe_keys, validate


class Inner(Strict):
    """`[inner]`: a nested section."""

    # a comment block
    # over two lines
    depth: int = Field(3, ge=1)
    mode: Literal["a", "b"] = "a"  # which mode


class Outer(Strict):
    """Outer config."""

    name: str  # required, no default
    path: Path = Path("runs/x")
    weights: dict[str, float] = Field(default_factory=lambda: {"acc": 1.0, "valid rate": 0.5})
    limit: int | None = Field(None, description="from Field(description=...)")
    tags: tuple[str, ...] = ("p", "q")
    inner: Inner = Field(default_factory=lambda: Inner(depth=5))


def test_describe_keys_reads_defaults_comments_and_types():
    keys = {k.key: k for k in describe_keys(Outer)}
    assert list(keys) == ["name", "path", "weights", "limit", "tags", "inner.depth", "inner.mode"]
    assert keys["name"].required and keys["name"].description == "required, no default"
    assert keys["path"].default == "runs/x" and keys["path"].type == "path"
    assert keys["weights"].default == {"acc": 1.0, "valid rate": 0.5}
    assert keys["limit"].default is None
    assert keys["limit"].description == "from Field(description=...)"
    assert keys["tags"].default == ["p", "q"] and keys["tags"].type == "list of string"
    # the parent's default instance wins over the section class's own default
    assert keys["inner.depth"].default == 5 and keys["inner.depth"].type == "int ≥ 1"
    assert keys["inner.depth"].description == "a comment block over two lines"
    assert keys["inner.mode"].type == '"a" | "b"' and keys["inner.mode"].description == "which mode"


def test_commented_toml_parses_and_round_trips():
    text = commented_toml(Outer)
    data = tomllib.loads(text)
    assert "name" not in data and "limit" not in data  # required / unset: commented out
    assert "# name = ...  # required, no default (string; required)" in text
    assert "[inner]\n# a nested section." in text
    data["name"] = "n"
    assert validate(Outer, data) == Outer(name="n")


class Late(Strict):
    """A section whose docstring
    runs over two lines."""

    inner: Inner = Field(default_factory=Inner)
    late: int = 1  # fmt: skip


class LateOuter(Strict):
    late_section: Late = Field(default_factory=Late)


def test_key_after_a_subsection_stays_in_its_table():
    text = commented_toml(LateOuter)
    assert tomllib.loads(text) == {"late_section": {"late": 1, "inner": {"depth": 3, "mode": "a"}}}
    assert "# A section whose docstring runs over two lines." in text  # one space, not indents
    assert "late = 1  # int\n" in text  # a tool's pragma is no description


@pytest.mark.parametrize("kind", sorted(RUN_CONFIGS))
def test_every_run_config_round_trips(kind: str):
    cls = run_config_class(kind)
    data = tomllib.loads(commented_toml(cls))
    required: dict[str, Any] = {k.key: ["x"] for k in describe_keys(cls) if k.required}
    if kind == "reward":
        required = {"logs": ["logs/"], "out": "runs/rm"}
    data.update(required)
    assert validate(cls, data) == cls.model_validate(required)


def test_trainer_defaults_and_inherited_comments():
    grpo = {k.key: k for k in describe_keys(run_config_class("grpo"))}
    assert grpo["optim.learning_rate"].default == 1e-5  # train grpo's own default
    assert grpo["checkpoint.every"].default == 10
    assert grpo["rewards"].default == {"intent_accuracy": 1.0, "plan_validity": 0.5}
    dpo = {k.key: k for k in describe_keys(run_config_class("dpo"))}
    assert dpo["dpo.beta"].default == 0.1
    assert "wins over epochs" in dpo["train.steps"].description  # from TrainConfig's source


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_config_show_prints_the_commented_toml(runner: CliRunner):
    res = runner.invoke(main, ["config", "show", "dpo"])
    assert res.exit_code == 0, res.output
    assert res.output == commented_toml(run_config_class("dpo"), title="studio-align train dpo")
    assert 'loss_type = "sigmoid"' in res.output


def test_config_show_json_and_bad_kind(runner: CliRunner):
    import json

    res = runner.invoke(main, ["config", "show", "kto", "--json"])
    keys = {k["key"]: k for k in json.loads(res.stdout)}
    assert keys["kto.beta"]["default"] == 0.1
    bad = runner.invoke(main, ["config", "show", "nope"])
    assert bad.exit_code == 2 and "nope" in bad.output


@pytest.mark.parametrize("kind", sorted(RUN_CONFIGS))
def test_train_help_lists_every_key(runner: CliRunner, kind: str):
    res = runner.invoke(main, ["train", kind, "--help"])
    assert res.exit_code == 0, res.output
    assert "Config keys" in res.output
    for key in describe_keys(run_config_class(kind)):
        assert key.key in res.output
