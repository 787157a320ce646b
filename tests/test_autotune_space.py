"""Search-space TOML: types, conditionals, locked keys, the loop-owned seed, unit mapping."""

from __future__ import annotations

import pytest
from autotune_helpers import write_space
from hypothesis import given
from hypothesis import strategies as st

from studio_align.autotune.space import Param, Space
from studio_align.config import apply_overrides
from studio_align.errors import ConfigError


def test_baseline_and_conditionals(tmp_path):
    space = Space.load(write_space(tmp_path))
    base = space.baseline()
    assert base == {"x": 0.3, "lr": 1e-3, "layers": 2, "opt": "adam"}  # momentum inactive
    sgd = space.complete({"opt": "sgd"})
    assert sgd["momentum"] == pytest.approx((0.5 + 0.99) / 2)  # middle of a linear range
    lr = Param(type="float", low=1e-4, high=1e-2, log=True)
    assert lr.baseline() == pytest.approx(1e-3)  # geometric middle of a log range
    assert "momentum" not in space.complete({"opt": "adam", "x": 0.5})


def test_complete_rejects_locked_seed_unknown_and_out_of_range(tmp_path):
    space = Space.load(write_space(tmp_path))
    with pytest.raises(ConfigError, match="locked"):
        space.complete({"noise": 0.5})
    with pytest.raises(ConfigError, match="seed key"):
        space.complete({"seed": 7})
    with pytest.raises(ConfigError, match="not a parameter"):
        space.complete({"dropout": 0.1})
    with pytest.raises(ConfigError, match=r"outside \[0.0, 1.0\]"):
        space.complete({"x": 1.5})
    with pytest.raises(ConfigError, match="not one of"):
        space.complete({"opt": "lion"})
    with pytest.raises(ConfigError, match="inactive"):
        space.complete({"momentum": 0.9}, strict=True)


def test_seed_key_may_not_be_tuned_or_locked(tmp_path):
    with pytest.raises(ConfigError, match="seed key, owned by the loop"):
        Space.load(write_space(tmp_path, locked={"seed": 3}))
    params = {"seed": {"type": "int", "low": 0, "high": 9}}
    with pytest.raises(ConfigError, match="seed key"):
        Space.load(write_space(tmp_path, params=params))


def test_invalid_params_name_the_key(tmp_path):
    bad = {"lr": {"type": "float", "low": 0.0, "high": 1.0, "log": True}}
    with pytest.raises(ConfigError, match=r"params\.lr.*low > 0"):
        Space.load(write_space(tmp_path, params=bad))
    cond = {"a": {"type": "float", "low": 0, "high": 1, "when": {"b": 1}}}
    with pytest.raises(ConfigError, match=r"params\.a\.when names 'b'"):
        Space.load(write_space(tmp_path, params=cond))
    with pytest.raises(ConfigError, match=r"params\.x is also a locked key"):
        Space.load(write_space(tmp_path, locked={"x": 0.1}))
    with pytest.raises(ConfigError, match=r"metric: Field required"):
        Space.from_dict({"data": {"validation": "v"}})


def test_overrides_round_trip_through_set_parsing(tmp_path):
    space = Space.load(write_space(tmp_path, locked={"model": {"name": 'say "hi"', "tie": True}}))
    config = space.complete({"x": 0.25, "opt": "sgd", "momentum": 0.7, "layers": 5})
    sets = space.overrides(config, seed=11)
    parsed = apply_overrides({}, sets)
    assert parsed["x"] == 0.25 and parsed["layers"] == 5 and parsed["opt"] == "sgd"
    assert parsed["model"] == {"name": 'say "hi"', "tie": True}
    assert parsed["seed"] == 11


@given(st.floats(0.0, 1.0))
def test_unit_mapping_round_trips(u):
    for p in (
        Param(type="float", low=1e-5, high=1e-1, log=True),
        Param(type="float", low=-2.0, high=3.0),
    ):
        v = p.from_unit(u)
        assert p.low <= v <= p.high
        assert p.from_unit(p.to_unit(v)) == pytest.approx(v, rel=1e-9)
    i = Param(type="int", low=1, high=64, log=True)
    assert i.from_unit(i.to_unit(i.from_unit(u))) == i.from_unit(u)
    c = Param(type="choice", values=["a", "b", "c"])
    assert c.from_unit(c.to_unit(c.from_unit(u))) == c.from_unit(u)


def test_an_unknown_placeholder_in_a_command_is_named() -> None:
    """`{sedd}` used to reach the command as literal text; the trial then crashed with a
    message that did not name it."""
    space = {"metric": {"name": "m", "direction": "maximize"}, "data": {"validation": "v"}}
    cmd = {"train": "studio-align train sft --set seed={sedd} {sets}"}
    with pytest.raises(ConfigError, match=r"command\.train.*unknown placeholder \{sedd\}"):
        Space.from_dict({**space, "command": cmd})
    ok = {"evaluate": 'python -c "import json; print(json.dumps({1: 2}))" {trial_dir}'}
    Space.from_dict({**space, "command": ok})  # braces that are no placeholder pass
