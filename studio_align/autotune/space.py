"""The arena of an autotune run, declared in one TOML file.

A person states what may change (typed parameters over any `--set` key of a training
config), what may not (locked keys), what is measured (a metric from `eval --json` and its
direction), how it is run (train and evaluate command templates), on which seeds, and the
budget. The loop reads nothing else, so a run is reproducible from its space file.

Design choices:
- Parameters are flat dotted keys (`optim.learning_rate`), exactly the keys `--set` takes.
- A conditional parameter (`when = {"lora.enabled" = true}`) is active only when an
  earlier parameter or locked key has one of the given values; inactive parameters are
  not passed to the trainer and not suggested to the sampler.
- The seed key is owned by the loop: it may not be a parameter or a locked key, so a
  proposer can never "win" by changing the seed. Seeds are listed under `[seeds]`.
- Every parameter maps to and from the unit interval (`to_unit` / `from_unit`), which the
  Sobol and hill-climbing proposers share; log-scaled ranges are uniform in log space.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from studio_align.config import Strict, read_toml, validate
from studio_align.errors import ConfigError

Scalar = bool | int | float | str
Config = dict[str, Scalar]

DEFAULT_TRAIN = "studio-align train sft --config {base_config} {sets} --set run_dir={trial_dir}"
DEFAULT_EVALUATE = (
    "studio-align eval router --checkpoint {trial_dir}/checkpoint --data {data} --json"
)


class Param(Strict):
    """One tunable key. `type` is `float`, `int` or `choice`."""

    type: Literal["float", "int", "choice"]
    low: float | None = None
    high: float | None = None
    log: bool = False
    values: list[Scalar] | None = None
    default: Scalar | None = None
    when: dict[str, Scalar | list[Scalar]] = Field(default_factory=dict)
    help: str = ""

    @model_validator(mode="after")
    def _check(self) -> Param:
        if self.type == "choice":
            if not self.values:
                raise ValueError("a choice parameter needs a non-empty `values` list")
            if self.low is not None or self.high is not None:
                raise ValueError("a choice parameter takes `values`, not `low`/`high`")
            if self.default is not None and self.default not in self.values:
                raise ValueError(f"default {self.default!r} is not one of {self.values}")
            return self
        if self.low is None or self.high is None:
            raise ValueError(f"a {self.type} parameter needs `low` and `high`")
        if self.values is not None:
            raise ValueError(f"a {self.type} parameter takes `low`/`high`, not `values`")
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        if self.log and self.low <= 0:
            raise ValueError("a log-scaled range needs low > 0")
        if self.type == "int" and (self.low != int(self.low) or self.high != int(self.high)):
            raise ValueError("an int parameter needs integer `low` and `high`")
        if self.default is not None:
            if isinstance(self.default, bool) or not isinstance(self.default, int | float):
                raise ValueError(f"default {self.default!r} is not a number")
            if not self.low <= float(self.default) <= self.high:
                raise ValueError(f"default {self.default} is outside [{self.low}, {self.high}]")
        return self

    def baseline(self) -> Scalar:
        """The default, else the middle of the range (geometric for log), else the first choice."""
        if self.default is not None:
            return self.cast(self.default)
        if self.type == "choice":
            assert self.values
            return self.values[0]
        return self.from_unit(0.5)

    def cast(self, value: Any) -> Scalar:
        if self.type == "int":
            return round(float(value))
        if self.type == "float":
            return float(value)
        return value  # type: ignore[no-any-return]

    def to_unit(self, value: Scalar) -> float:
        """Map a value to [0, 1] (choices: centre of their slot)."""
        if self.type == "choice":
            assert self.values
            return (self.values.index(value) + 0.5) / len(self.values)
        assert self.low is not None and self.high is not None
        lo, hi, v = self.low, self.high, float(value)
        if self.log:
            lo, hi, v = math.log(lo), math.log(hi), math.log(v)
        return min(1.0, max(0.0, (v - lo) / (hi - lo)))

    def from_unit(self, u: float) -> Scalar:
        u = min(1.0, max(0.0, float(u)))
        if self.type == "choice":
            assert self.values
            return self.values[min(len(self.values) - 1, int(u * len(self.values)))]
        assert self.low is not None and self.high is not None
        lo, hi = self.low, self.high
        if self.log:
            v = math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
        else:
            v = lo + u * (hi - lo)
        if self.type == "int":
            return int(min(hi, max(lo, round(v))))
        return float(min(hi, max(lo, v)))

    def check(self, key: str, value: Any) -> Scalar:
        """Validate a proposed value (e.g. from an agent); returns it cast to the type."""
        if self.type == "choice":
            assert self.values
            if value not in self.values:
                raise ConfigError(f"{key}: {value!r} is not one of {self.values}")
            return value  # type: ignore[no-any-return]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key}: {value!r} is not a number")
        if self.type == "int" and value != int(value):
            raise ConfigError(f"{key}: {value!r} is not an integer")
        assert self.low is not None and self.high is not None
        if not self.low <= float(value) <= self.high:
            raise ConfigError(f"{key}: {value} is outside [{self.low}, {self.high}]")
        return self.cast(value)

    def describe(self) -> str:
        if self.type == "choice":
            return f"one of {self.values}"
        scale = "log" if self.log else "linear"
        return f"{self.type} in [{_fmt(self.low)}, {_fmt(self.high)}] ({scale})"


class Metric(Strict):
    """The figure the loop optimises: a key of the evaluate command's JSON (dotted if nested)."""

    name: str
    direction: Literal["maximize", "minimize"] = "maximize"

    @property
    def sign(self) -> float:
        return 1.0 if self.direction == "maximize" else -1.0


class Budget(Strict):
    """`trials` counts candidate trials (the baseline is extra); seconds are wall-clock."""

    trials: int = Field(default=20, ge=0)
    wall_clock_s: float = Field(default=3600.0, gt=0)
    trial_timeout_s: float = Field(default=600.0, gt=0)


class Seeds(Strict):
    """Seeds of the baseline (noise estimate), of a candidate's first pass, and extra
    seeds added one at a time while a decision is too close to call."""

    baseline: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=2)
    candidate: list[int] = Field(default_factory=lambda: [0], min_length=1)
    extra: list[int] = Field(default_factory=lambda: [1, 2])
    sampler: int = 0  # seed of the proposer itself

    @model_validator(mode="after")
    def _distinct(self) -> Seeds:
        for name, seeds in (
            ("baseline", self.baseline),
            ("candidate", self.candidate + self.extra),
        ):
            if len(set(seeds)) != len(seeds):
                raise ValueError(f"{name} seeds repeat: {seeds}")
        return self


class Acceptance(Strict):
    """Keep a candidate only if it beats the best by more than `k` standard errors.

    margin = t(k, dof) * sigma * sqrt(1/n_best + 1/n_candidate), with sigma the pooled
    standard deviation across seeds (never below `min_std`) and t(k, dof) the Student-t
    quantile at the confidence that `k` has for a normal (see `acceptance.critical`).
    A candidate that passes on fewer than `keep_seeds` seeds is run on more (the
    baseline's seeds, then the extra ones) and decided again before it is kept.
    """

    k: float = Field(default=2.0, ge=0)
    min_std: float = Field(default=0.0, ge=0)
    keep_seeds: int | None = Field(default=None, ge=1)  # None: as many as the baseline ran on


PLACEHOLDERS = ("{base_config}", "{sets}", "{trial_dir}", "{seed}", "{data}", "{python}", "{out}")


class Command(Strict):
    """How a trial runs. Templates are split like a shell line; placeholders:
    `{base_config}`, `{sets}` (expands to `--set key=value` for every active parameter,
    locked key and the seed), `{trial_dir}`, `{seed}`, `{data}` (the split's file),
    `{python}` (this interpreter), `{out}` (the autotune output directory)."""

    train: str = DEFAULT_TRAIN
    evaluate: str = DEFAULT_EVALUATE
    base_config: str = ""
    seed_key: str = "seed"
    cwd: str = "."
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("train", "evaluate")
    @classmethod
    def _splits(cls, v: str) -> str:
        try:
            shlex.split(v)
        except ValueError as e:
            raise ValueError(f"cannot split command: {e}") from None
        unknown = sorted(set(re.findall(r"\{[A-Za-z_]+\}", v)) - set(PLACEHOLDERS))
        if unknown:  # it would reach the command as literal text, and fail there
            raise ValueError(f"unknown placeholder {unknown[0]} (known: {', '.join(PLACEHOLDERS)})")
        return v


class Data(Strict):
    """Selection uses `validation`; `heldout` is evaluated once, at the end, on the best."""

    validation: str
    heldout: str | None = None


class SpaceFile(Strict):
    name: str = "autotune"
    metric: Metric
    budget: Budget = Budget()
    seeds: Seeds = Seeds()
    acceptance: Acceptance = Acceptance()
    command: Command = Command()
    data: Data
    locked: dict[str, Any] = Field(default_factory=dict)
    params: dict[str, Param] = Field(default_factory=dict)


class Space:
    """A validated search space with paths resolved against the space file's folder."""

    def __init__(self, spec: SpaceFile, root: Path, source: str = "space") -> None:
        self.spec = spec
        self.root = root
        self.source = source
        self.locked: Config = _flatten(spec.locked)
        self.params: dict[str, Param] = dict(spec.params)
        self._check()

    # -- loading ---------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path) -> Space:
        p = Path(path).resolve()
        spec = validate(SpaceFile, read_toml(p), source=str(p))
        return cls(spec, p.parent, str(p))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], root: str | Path = ".") -> Space:
        return cls(validate(SpaceFile, dict(data), source="space"), Path(root).resolve())

    def _check(self) -> None:
        seed_key = self.spec.command.seed_key
        if seed_key in self.params or seed_key in self.locked:
            raise ConfigError(
                f"{self.source}: {seed_key!r} is the seed key, owned by the loop; "
                "list seeds under [seeds] instead of tuning or locking it"
            )
        for key in self.params:
            if key in self.locked:
                raise ConfigError(f"{self.source}: params.{key} is also a locked key")
        seen: set[str] = set()
        for key, p in self.params.items():
            for cond in p.when:
                if cond == key or (cond not in seen and cond not in self.locked):
                    raise ConfigError(
                        f"{self.source}: params.{key}.when names {cond!r}, which must be a "
                        "locked key or a parameter declared before it"
                    )
            seen.add(key)
        if "{trial_dir}" not in self.spec.command.train:
            raise ConfigError(f"{self.source}: command.train must contain {{trial_dir}}")

    # -- derived facts -----------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def metric(self) -> Metric:
        return self.spec.metric

    def path(self, rel: str) -> Path:
        p = Path(rel).expanduser()
        return p if p.is_absolute() else (self.root / p).resolve()

    def is_active(self, key: str, config: Mapping[str, Any]) -> bool:
        """Whether `key` is active given the values chosen so far (and the locked keys)."""
        for cond, allowed in self.params[key].when.items():
            value = config.get(cond, self.locked.get(cond))
            options = allowed if isinstance(allowed, list) else [allowed]
            if value not in options:
                return False
        return True

    def baseline(self) -> Config:
        """The baseline config: every active parameter at its default."""
        out: Config = {}
        for key, p in self.params.items():
            if self.is_active(key, out):
                out[key] = p.baseline()
        return out

    def complete(self, partial: Mapping[str, Any], *, strict: bool = False) -> Config:
        """Build a full config in declaration order: take values from `partial` where
        given (validated), fill active keys from the baseline, drop inactive ones (with
        `strict`, a value given for an inactive key is an error instead).

        Raises ConfigError for unknown keys, locked keys, the seed key or bad values."""
        seed_key = self.spec.command.seed_key
        for key in partial:
            if key == seed_key:
                raise ConfigError(f"{key!r} is the seed key, owned by the loop")
            if key in self.locked:
                raise ConfigError(f"{key!r} is locked at {self.locked[key]!r}")
            if key not in self.params:
                raise ConfigError(f"{key!r} is not a parameter of the space")
        out: Config = {}
        for key, p in self.params.items():
            if not self.is_active(key, out):
                if strict and key in partial:
                    raise ConfigError(f"{key!r} is inactive: it needs {p.when}")
                continue
            out[key] = p.check(key, partial[key]) if key in partial else p.baseline()
        return out

    def from_units(self, units: Mapping[str, float]) -> Config:
        """Decode one point of the unit cube (one coordinate per parameter)."""
        out: Config = {}
        for key, p in self.params.items():
            if self.is_active(key, out):
                out[key] = p.from_unit(units[key])
        return out

    def overrides(self, config: Mapping[str, Any], seed: int) -> list[str]:
        """The `key=value` overrides a trial passes: locked keys, parameters, the seed."""
        items: dict[str, Any] = {**self.locked, **config, self.spec.command.seed_key: seed}
        return [f"{k}={_toml_value(v)}" for k, v in items.items()]

    def diff(self, config: Mapping[str, Any], reference: Mapping[str, Any]) -> str:
        """A short `key=value` summary of what `config` changes relative to `reference`."""
        parts = []
        for key in self.params:
            a, b = config.get(key), reference.get(key)
            if a != b:
                parts.append(f"{key}={_fmt(a)}" if a is not None else f"-{key}")
        return " ".join(parts) or "(baseline)"


def _flatten(data: Mapping[str, Any], prefix: str = "") -> Config:
    out: Config = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _toml_value(v: Any) -> str:
    """Render a value so that `config.parse_value` reads it back unchanged."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise ConfigError(f"cannot pass {v!r} as an override")


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)
