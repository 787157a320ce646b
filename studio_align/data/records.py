"""One typed path for record files: every JSONL of records is read here.

`data compile` writes one JSONL per record kind (`RECORD_MODELS`); users hand-write
labelled routing examples (SFT data, evaluation sets) in the same shape as the compiled
`routing_examples`. Both go through `read_record_file`, so a bad line is reported the
same way wherever it is read: `file:line: reason`.

Design choices:
- Validation is pydantic's (`model_validate_json` on the raw bytes: one parse per line).
- Hand-written labelled examples may carry extra keys (an id, a language tag, a note):
  they are kept as they are for callers that report by them, and ignored otherwise.
- With a catalog, every plan is checked against it (unknown steps, unsatisfiable
  plans for the request's attachments), so an SFT file cannot train on a plan the
  router can never emit.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from studio_align.catalog import Catalog
from studio_align.data.schemas import RECORD_MODELS, RoutingExample
from studio_align.errors import DataError

SPLITS = ("train", "heldout")


class LabelledExample(RoutingExample):
    """A hand-written labelled routing example; extra keys are allowed and kept."""

    model_config = ConfigDict(extra="allow", frozen=True)


RecordKind = str | type[BaseModel]


def _model_for(kind: RecordKind) -> type[BaseModel]:
    if isinstance(kind, type):  # a task's own record model (third-party tasks)
        return kind
    if kind == "routing_examples":
        return LabelledExample
    if kind not in RECORD_MODELS:
        raise DataError(f"unknown record kind {kind!r}; expected one of {', '.join(RECORD_MODELS)}")
    return RECORD_MODELS[kind]


def _reason(e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "line"
    return f"{where}: {err.get('msg', 'invalid')}"


def _plan_problems(row: dict[str, Any], catalog: Catalog, steps_only: bool) -> list[str]:
    request = row.get("request") or {}
    attachments = request.get("attachments", []) if isinstance(request, dict) else []
    problems = []
    for key in ("plan", "chosen") if not steps_only else ():
        plan = row.get(key)
        if plan:
            problems += [f"{key}: {p}" for p in catalog.plan_problems(plan, attachments)]
    # a rejected (or undesirable) plan may be unsatisfiable, but its steps must exist
    for key in ("rejected",) if not steps_only else ("plan", "chosen", "rejected"):
        problems += [f"{key}: unknown step {s!r}" for s in row.get(key) or [] if s not in catalog]
    return problems


def iter_record_models(
    path: str | os.PathLike[str], kind: RecordKind, *, catalog: Catalog | None = None
) -> Iterator[BaseModel]:
    """Validated records of `kind` from a JSONL file as their pydantic models."""
    yield from _iter(path, kind, catalog, steps_only=False)


def iter_record_file(
    path: str | os.PathLike[str],
    kind: RecordKind,
    *,
    catalog: Catalog | None = None,
    steps_only: bool = False,
) -> Iterator[dict[str, Any]]:
    """Validated records of `kind` from a JSONL file, as plain dicts, in file order.

    `kind` is a compiled record kind (`RECORD_MODELS`) or a pydantic model of a task's own.

    Blank lines are skipped; the first invalid line raises `DataError` naming file and line.
    With `catalog`, plans are checked against it: that each is satisfiable by the request's
    attachments, or with `steps_only` just that every step exists (undesirable plans, say).
    """
    for obj in _iter(path, kind, catalog, steps_only):
        yield obj.model_dump(mode="json")


def read_record_file(
    path: str | os.PathLike[str],
    kind: RecordKind,
    *,
    catalog: Catalog | None = None,
    steps_only: bool = False,
) -> list[dict[str, Any]]:
    """All records of `iter_record_file` as a list."""
    return list(iter_record_file(path, kind, catalog=catalog, steps_only=steps_only))


def compiled_path(out_dir: str | os.PathLike[str], kind: RecordKind, split: str = "train") -> Path:
    """Where `data compile` (or a task's own compiler) put the records of `kind` for `split`."""
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}; expected train or heldout")
    name = kind if isinstance(kind, str) else getattr(kind, "file_stem", kind.__name__)
    _model_for(kind)
    return Path(out_dir) / split / f"{name}.jsonl"


def _iter(
    path: str | os.PathLike[str], kind: RecordKind, catalog: Catalog | None, steps_only: bool
) -> Iterator[BaseModel]:
    model = _model_for(kind)
    label = kind if isinstance(kind, str) else kind.__name__
    p = Path(path)
    if p.is_dir():
        raise DataError(f"{p}: is a directory, expected a JSONL file of {label}")
    try:
        f = open(p, "rb")  # noqa: SIM115 - closed by the `with` below; opening errors differ
    except FileNotFoundError:
        raise DataError(f"{p}: file not found") from None
    except OSError as e:
        raise DataError(f"{p}: cannot read ({e.strerror or e})") from None
    with f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = model.model_validate_json(line)
            except ValidationError as e:
                if e.errors()[0].get("type") == "json_invalid":
                    raise DataError(f"{p}:{i}: invalid JSON") from None
                raise DataError(f"{p}:{i}: not a valid {label} record ({_reason(e)})") from None
            except UnicodeDecodeError:
                raise DataError(f"{p}:{i}: not UTF-8") from None
            if catalog is not None:
                problems = _plan_problems(obj.model_dump(mode="json"), catalog, steps_only)
                if problems:
                    raise DataError(f"{p}:{i}: {'; '.join(problems)}")
            yield obj
