"""Config loading: pydantic models from TOML with `--set key=value` overrides.

One pydantic model per concern, composed by each command's run config. Every model
forbids unknown keys, so a typo is an error that names the key instead of a silently
ignored setting. Overrides use dotted keys (`optim.learning_rate=3e-4`) and values are
parsed as TOML scalars/arrays, falling back to a bare string. Errors name the dotted
key, say when it came from `--set`, and suggest the closest known key for a typo.

`describe_keys` and `commented_toml` describe a model for people (`train KIND --help`,
`studio-align config show KIND`): defaults come from the model itself, descriptions from
`Field(description=...)` or, as most fields here are documented, from the comment beside
or above the field in the class source, so the listing cannot drift from the code.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import io
import json
import textwrap
import tokenize
import tomllib
import types
import typing
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import PydanticCustomError

from studio_align.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


class Strict(BaseModel):
    """Base for config models: unknown keys are errors, assignments are validated, and a
    number must be finite (`inf` or `nan` as a learning rate or threshold is an error)."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, frozen=False, allow_inf_nan=False
    )


def refuse_moved(data: Any, moved: Mapping[str, str]) -> Any:
    """Body of a `mode="before"` validator: a key of `data` that moved to a shared section
    (`moved`: key -> its new dotted place, e.g. `{"steps": "train.steps"}`) is one line
    saying where it lives now, instead of an "unknown key"."""
    if isinstance(data, Mapping):
        for key, dest in moved.items():
            if key in data:
                raise PydanticCustomError(
                    "moved_key",
                    "`{key}` moved to the shared [{section}] section: write {dest} = {value} "
                    "(as every trainer's run config does)",
                    {
                        "key": key,
                        "section": dest.split(".")[0],
                        "dest": dest,
                        "value": repr(data[key]),
                    },
                )
    return data


def parse_value(text: str) -> Any:
    """Parse an override value as a TOML value (`3e-4`, `true`, `[1, 2]`, `"x"`), else a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    except RecursionError:
        raise ConfigError(f"--set value {text[:40]!r}...: nested too deeply") from None


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
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: not valid UTF-8 (byte {e.start}: {e.reason})") from None
    except RecursionError:
        raise ConfigError(f"{p}: invalid TOML: arrays or tables nested too deeply") from None
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
            key = ".".join(str(p) for p in err["loc"])
            if err["type"] == "extra_forbidden":
                msg = "unknown key" + _suggestion(model, tuple(err["loc"]))
            else:
                msg = err["msg"]
            if any(key == k or key.startswith(k + ".") for k in overridden):
                msg += " (from --set)"
            problems.append(f"{key}: {msg}" if key else msg)  # a whole-config error names its keys
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


# -- describing a config model: `train * --help` and `studio-align config show` ------------------


class ConfigKey(typing.NamedTuple):
    """One leaf key of a config model, as `describe_keys` lists it."""

    key: str  # dotted: `optim.learning_rate`
    default: Any  # plain TOML-able value; None when unset; meaningless when required
    description: str  # Field(description=...), else the comment beside or above the field
    type: str  # readable type with constraints: `float > 0`, `"cosine" | "linear"`
    required: bool = False


def _plain(v: Any) -> Any:
    """A default as TOML would hold it (paths as strings, tuples as lists, models as tables)."""
    if isinstance(v, BaseModel):
        return _plain(v.model_dump(mode="json"))
    if isinstance(v, Path):
        return str(v)
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple | set | frozenset):
        return [_plain(x) for x in v]
    return v


_PRAGMAS = ("fmt:", "noqa", "type:", "pragma:")  # tool directives, not descriptions


def _comments(cls: type) -> dict[str, str]:
    """Field name -> the comment beside its definition, else the comment lines right above it.

    Read from the class source (`ast` for statement spans, `tokenize` for comments); a class
    without source (built dynamically, or a zip without .py files) simply has none.
    """
    try:
        src = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    comments: dict[int, str] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            text = tok.string.lstrip("#").strip()
            if tok.type == tokenize.COMMENT and not text.startswith(_PRAGMAS):
                comments[tok.start[0]] = text
    except (tokenize.TokenError, IndentationError):
        return {}
    lines = src.splitlines()
    out: dict[str, str] = {}
    body = ast.parse(src).body[0]
    for node in getattr(body, "body", []):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        end = node.end_lineno or node.lineno
        beside = [comments[n] for n in range(node.lineno, end + 1) if n in comments]
        if beside:
            out[node.target.id] = " ".join(beside)
            continue
        above: list[str] = []
        n = node.lineno - 1
        while n in comments and lines[n - 1].strip().startswith("#"):
            above.insert(0, comments[n])
            n -= 1
        if above:
            out[node.target.id] = " ".join(above)
    return out


def _constraints(field: Any) -> str:
    signs = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<", "min_length": "length ≥"}
    parts = []
    for meta in field.metadata:
        for attr, sign in signs.items():
            value = getattr(meta, attr, None)
            if value is not None:
                parts.append(f"{sign} {value}")
    return " " + ", ".join(parts) if parts else ""


def _type_name(annotation: Any) -> str:
    """`int`, `float`, `path`, `"a" | "b"`, `list of int`, `table`; `None` dropped from unions."""
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin is typing.Literal:
        return " | ".join(f'"{a}"' if isinstance(a, str) else str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin in (list, tuple, set, frozenset) or annotation in (list, tuple):
        inner = [a for a in args if a is not Ellipsis]
        return "list" + (f" of {_type_name(inner[0])}" if inner else "")
    if origin in (dict, Mapping) or annotation is dict:
        return "table"
    if annotation is Any:
        return "any"
    if isinstance(annotation, type):
        if issubclass(annotation, Path):
            return "path"
        return {"str": "string", "bool": "true | false"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation)


def _section_doc(cls: type) -> str:
    """The first sentence of a section's docstring, without its leading "`[x]`: "."""
    doc = " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())
    if doc.startswith("`[") and "`:" in doc[:40]:
        doc = doc.split("`:", 1)[1].strip()
    return doc


def _walk(
    model: type[BaseModel], instance: BaseModel | None, prefix: str
) -> Iterable[tuple[str, Any, ConfigKey | None]]:
    """Yield `(dotted, submodel class, None)` for sections and `(dotted, None, key)` for leaves."""
    notes: dict[str, str] = {}
    for cls in reversed(model.__mro__):  # inherited fields keep their own comments
        if isinstance(cls, type) and issubclass(cls, BaseModel) and cls is not BaseModel:
            notes.update(_comments(cls))
    for name, field in model.model_fields.items():
        dotted = f"{prefix}{name}"
        required = field.is_required()
        if instance is not None:
            value = getattr(instance, name)
        elif required:
            value = None
        else:
            value = field.get_default(call_default_factory=True)
        sub = _submodel(field.annotation)
        if sub is not None and (value is not None or required):
            yield dotted, sub, None
            yield from _walk(sub, value if isinstance(value, BaseModel) else None, dotted + ".")
            continue
        description = field.description or notes.get(name, "")
        type_name = _type_name(field.annotation) + _constraints(field)
        yield dotted, None, ConfigKey(dotted, _plain(value), description, type_name, required)


def describe_keys(model: type[BaseModel]) -> list[ConfigKey]:
    """Every leaf key of `model` with its default, description and type, in field order.

    Defaults are the run config's own (a trainer that overrides a section's default, as
    `train grpo` does for `optim.learning_rate`, shows its value, not the section's).
    """
    return [key for _, _, key in _walk(model, None, "") if key is not None]


def _toml_key(k: str) -> str:
    return k if k and all(c.isalnum() or c in "_-" for c in k) else json_quote(k)


def json_quote(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def toml_value(v: Any) -> str:
    """One TOML value (inline tables for mappings), e.g. `{ intent_accuracy = 1.0 }`."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, Mapping):
        if not v:
            return "{}"
        return "{ " + ", ".join(f"{_toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, str):
        return json_quote(v)
    if isinstance(v, float) and v != v:
        return "nan"
    if isinstance(v, float) and v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return repr(v)


def _key_line(k: ConfigKey, name: str) -> str:
    """`name = value  # description (type)`; unset and required keys commented out."""
    note = k.description.rstrip(".")
    kind = f"{k.type}; required" if k.required else k.type
    comment = f"{note} ({kind})" if note else kind
    if k.required:
        return f"# {name} = ...  # {comment}"
    if k.default is None:
        return f"# {name} = ...  # {comment}; unset by default"
    return f"{name} = {toml_value(k.default)}  # {comment}"


def commented_toml(model: type[BaseModel], *, title: str | None = None) -> str:
    """A TOML file of `model`'s defaults, every key commented with what it means and its type.

    It parses (`tomllib`) and, with any required keys filled in, validates to the model's
    defaults: a starting point to copy and edit. Unset keys (default None) and required
    ones are written as comments.
    """
    head = [f"# {title or model.__name__}: default configuration"]
    doc = _section_doc(model)
    if doc:
        head.append(f"# {doc}")
    head.append("# A key written `# key = ...` is unset (or required); uncomment it to set it.")
    top: list[str] = []
    sections: dict[str, list[str]] = {}  # a key after a subsection still goes to its own table
    for dotted, sub, key in _walk(model, None, ""):
        if sub is not None:
            block = ["", f"[{dotted}]"]
            doc = _section_doc(sub)
            if doc:
                block.append(f"# {doc}")
            sections[dotted] = block
            continue
        assert key is not None
        parent = dotted.rsplit(".", 1)[0] if "." in dotted else ""
        target = sections[parent] if parent else top
        target.append(_key_line(key, dotted.rsplit(".", 1)[-1]))
    body = [*head, "", *top]
    for block in sections.values():
        body.extend(block)
    return "\n".join(body).rstrip() + "\n"
