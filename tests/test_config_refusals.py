"""Config inputs that used to slip through or crash: each is one ConfigError naming the
file or key."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from studio_align.config import apply_overrides, read_toml, validate
from studio_align.errors import ConfigError
from studio_align.training.optim import OptimConfig
from studio_align.training.run import ModelSection, prepare_run_dir


def test_bad_utf8_config_names_its_file(tmp_path: Path) -> None:
    p = tmp_path / "run.toml"
    p.write_bytes(b'run_dir = "\xff"\n')
    with pytest.raises(ConfigError, match=r"run\.toml: not valid UTF-8"):
        read_toml(p)


def test_deeply_nested_toml_is_a_config_error(tmp_path: Path) -> None:
    p = tmp_path / "deep.toml"
    p.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match=r"deep\.toml: invalid TOML"):
        read_toml(p)
    with pytest.raises(ConfigError, match="nested too deeply"):
        apply_overrides({}, ["x=" + "[" * 5000 + "]" * 5000])


@pytest.mark.parametrize("value", ["inf", "-inf", "nan"])
def test_non_finite_numbers_are_refused(value: str) -> None:
    data = apply_overrides({}, [f"learning_rate={value}"])
    with pytest.raises(ConfigError, match="learning_rate"):
        validate(OptimConfig, data, source="--set")


def test_run_dir_never_the_working_directory_or_the_source(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "ck"
    src.mkdir()
    for run_dir in ("", ".", str(tmp_path)):
        cfg = SimpleNamespace(run_dir=Path(run_dir), model=ModelSection())
        with pytest.raises(ConfigError, match="run_dir: empty or the working directory"):
            prepare_run_dir(cfg)
    outer = tmp_path / "outer"
    for run_dir, init_from in ((src, src), (src / "inner", src), (outer, outer / "model")):
        cfg = SimpleNamespace(run_dir=run_dir, model=ModelSection(init_from=init_from))
        with pytest.raises(ConfigError, match=r"overlaps model\.init_from"):
            prepare_run_dir(cfg)
    assert sorted(p.name for p in src.iterdir()) == []
