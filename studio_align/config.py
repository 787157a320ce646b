"""Config loading: pydantic models from TOML with `--set key=value` overrides.

One pydantic model per concern, composed by each command's run config. Every model
forbids unknown keys, so a typo is an error that names the key instead of a silently
ignored setting. Overrides use dotted keys (`optim.learning_rate=3e-4`) and values are
parsed as TOML scalars/arrays, falling back to a bare string. Errors name the dotted
key, say when it came from `--set`, and suggest the closest known key for a typo.
"""

from __future__ import annotations

import difflib
import tomllib
import typing
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from studio_align.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


class Strict(BaseModel):
    """Base for config models: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)


def parse_value(text: str) -> Any:
    """Parse an override value as a TOML value (`3e-4`, `true`, `[1, 2]`, `"x"`), else a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Return a copy of `data` with each `dotted.key=value` override applied."""
    out: dict[str, Any] = _deep_copy(data)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected key=value")
        key, _, raw = item.partition("=")
        key = key.strip()
        if not key:
            raise ConfigError(f"--set {item!r}: empty key")
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"--set {key}: {part!r} is not a table")
            node = child
        node[parts[-1]] = parse_value(raw.strip())
    return out


def _deep_copy(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, Mapping) else v for k, v in data.items()}


def read_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML file; a syntax error names the file and line."""
    p = Path(path)
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ConfigError(f"{p}: config file not found") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: invalid TOML: {e}") from e


def _submodel(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside a field annotation (`Sub`, `Sub | None`), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _submodel(arg)
        if found is not None:
            return found
    return None


def _suggestion(model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """` (did you mean 'x'?)` for an unknown key at `loc`, or an empty string."""
    current: type[BaseModel] = model
    for part in loc[:-1]:
        field = current.model_fields.get(str(part))
        sub = _submodel(field.annotation) if field is not None else None
        if sub is None:
            return ""
        current = sub
    close = difflib.get_close_matches(str(loc[-1]), list(current.model_fields), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def validate(
    model: type[M],
    data: Mapping[str, Any],
    *,
    source: str = "config",
    overridden: Collection[str] = (),
) -> M:
    """Validate `data` against `model`; errors name each offending dotted key and why.

    `overridden` holds the dotted keys set by `--set`, so their errors say so.
    """
    try:
        return model.model_validate(data)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            key = ".".join(str(p) for p in err["loc"]) or "<root>"
            if err["type"] == "extra_forbidden":
                msg = "unknown key" + _suggestion(model, tuple(err["loc"]))
            else:
                msg = err["msg"]
            if any(key == k or key.startswith(k + ".") for k in overridden):
                msg += " (from --set)"
            problems.append(f"{key}: {msg}")
        raise ConfigError(f"{source}: " + "; ".join(problems)) from None


def load_config(model: type[M], path: str | Path | None = None, overrides: Iterable[str] = ()) -> M:
    """Load `model` from an optional TOML file plus `--set` overrides."""
    overrides = list(overrides)
    data = read_toml(path) if path is not None else {}
    data = apply_overrides(data, overrides)
    keys = [o.partition("=")[0].strip() for o in overrides]
    return validate(model, data, source=str(path) if path else "config", overridden=keys)


def dump_toml(model: BaseModel) -> str:
    """Serialise a config model back to TOML (for run directories and autotune ledgers)."""
    import tomli_w

    return tomli_w.dumps(_drop_none(model.model_dump(mode="json")))


def _drop_none(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _drop_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_drop_none(v) for v in obj]
    return obj
