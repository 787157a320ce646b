"""Config loading: TOML + `--set` overrides; unknown or invalid keys are errors naming the key."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import Field

from studio_align.config import (
    Strict,
    apply_overrides,
    dump_toml,
    load_config,
    parse_value,
    read_toml,
    validate,
)
from studio_align.errors import ConfigError


class Optim(Strict):
    learning_rate: float = 1e-3
    schedule: str = "cosine"
    betas: list[float] = Field(default_factory=lambda: [0.9, 0.999])


class Run(Strict):
    name: str = "run"
    steps: int = 10
    bf16: bool = False
    optim: Optim = Optim()
    rewards: dict[str, float] = Field(default_factory=dict)
    seed: int | None = None


@pytest.fixture
def run_toml(tmp_path):
    p = tmp_path / "run.toml"
    p.write_text('name = "exp"\nsteps = 5\n\n[optim]\nlearning_rate = 0.01\n', encoding="utf-8")
    return p


def test_load_file_and_defaults(run_toml):
    cfg = load_config(Run, run_toml)
    assert (cfg.name, cfg.steps, cfg.optim.learning_rate, cfg.optim.schedule) == (
        "exp",
        5,
        0.01,
        "cosine",
    )


def test_set_overrides_dotted_keys_with_typed_values(run_toml):
    cfg = load_config(
        Run,
        run_toml,
        [
            "steps=20",
            "bf16=true",
            "optim.learning_rate=3e-4",
            "optim.betas=[0.8, 0.95]",
            "optim.schedule=linear",  # bare word: a string
            "name='quoted'",
            "rewards.intent_accuracy=1.0",
            "rewards.plan_validity=0.5",
        ],
    )
    assert cfg.steps == 20 and isinstance(cfg.steps, int)
    assert cfg.bf16 is True
    assert cfg.optim.learning_rate == pytest.approx(3e-4)
    assert cfg.optim.betas == [0.8, 0.95]
    assert cfg.optim.schedule == "linear"
    assert cfg.name == "quoted"
    assert cfg.rewards == {"intent_accuracy": 1.0, "plan_validity": 0.5}
    assert load_config(Run, None, ["optim.learning_rate=2"]).optim.learning_rate == 2.0


def test_parse_value_types():
    assert parse_value("3") == 3
    assert parse_value("3.5") == 3.5
    assert parse_value("false") is False
    assert parse_value('"3"') == "3"
    assert parse_value("[1, 2]") == [1, 2]
    assert parse_value("hello world") == "hello world"
    assert parse_value("") == ""


def test_unknown_key_in_file_names_the_key_and_suggests(tmp_path):
    p = tmp_path / "typo.toml"
    p.write_text("[optim]\nlearning_rat = 0.1\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(Run, p)
    msg = str(info.value)
    assert str(p) in msg
    assert "optim.learning_rat: unknown key (did you mean 'learning_rate'?)" in msg
    assert "--set" not in msg


def test_unknown_key_from_set_says_so():
    with pytest.raises(
        ConfigError, match=r"stepz: unknown key \(did you mean 'steps'\?\) \(from --set\)"
    ):
        load_config(Run, None, ["stepz=3"])
    with pytest.raises(
        ConfigError, match=r"optim.nope.deeper: unknown key|optim.nope: unknown key"
    ):
        load_config(Run, None, ["optim.nope.deeper=1"])


def test_invalid_value_names_key_and_reason():
    with pytest.raises(
        ConfigError, match=r"steps: Input should be a valid integer.*\(from --set\)"
    ):
        load_config(Run, None, ["steps=many"])
    with pytest.raises(ConfigError, match=r"optim.learning_rate: Input should be a valid number"):
        validate(Run, {"optim": {"learning_rate": "fast"}})


def test_bad_override_syntax():
    with pytest.raises(ConfigError, match="expected key=value"):
        apply_overrides({}, ["steps"])
    with pytest.raises(ConfigError, match="empty key"):
        apply_overrides({}, ["=3"])
    with pytest.raises(ConfigError, match=r"--set name.x: 'name' is not a table"):
        apply_overrides({"name": "exp"}, ["name.x=1"])


def test_overrides_do_not_mutate_input():
    data = {"optim": {"learning_rate": 0.1}}
    out = apply_overrides(data, ["optim.learning_rate=0.2"])
    assert data["optim"]["learning_rate"] == 0.1 and out["optim"]["learning_rate"] == 0.2


def test_file_errors_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match=r"missing\.toml: config file not found"):
        read_toml(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("steps = = 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad.toml: invalid TOML.*line 1"):
        read_toml(bad)


def test_assignment_is_validated():
    cfg = Run()
    with pytest.raises(Exception, match="steps"):
        cfg.steps = "lots"  # type: ignore[assignment]


def test_dump_round_trip(tmp_path):
    cfg = load_config(Run, None, ["optim.learning_rate=3e-4", "rewards.a=2.0"])
    p = tmp_path / "dumped.toml"
    p.write_text(dump_toml(cfg), encoding="utf-8")
    assert load_config(Run, p) == cfg


@given(st.integers(-(10**9), 10**9), st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_set_numbers_round_trip(steps, lr):
    cfg = load_config(Run, None, [f"steps={steps}", f"optim.learning_rate={lr!r}"])
    assert cfg.steps == steps
    assert cfg.optim.learning_rate == pytest.approx(lr)
