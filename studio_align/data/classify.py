"""Why pydantic refused a creator-log line: its first error mapped to a `Reason`, with a
short detail (up to three errors, each with its field location).

Split from the reader so both of its paths (iteration and validate-only) report a
refused line the same way, from the same function.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from studio_align.data.results import Reason
from studio_align.data.schemas import EVENT_TYPES, MISSING_ERROR


def _loc(parts: tuple[int | str, ...]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def classify(err: ValidationError, data: bytes) -> tuple[Reason, str]:
    errors = err.errors(include_url=False, include_input=False)
    first = errors[0]
    kind = first["type"]
    if kind == "json_invalid":
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as u:
            return Reason.NON_UTF8, f"invalid UTF-8 at byte {u.start}"
        return Reason.BAD_JSON, first["msg"].removeprefix("Invalid JSON: ")
    if kind == "union_tag_invalid":
        tag = (first.get("ctx") or {}).get("tag")
        return (
            Reason.UNKNOWN_TYPE,
            f"unknown event type {tag!r} (expected one of {', '.join(EVENT_TYPES)})",
        )
    if kind == "union_tag_not_found":
        return Reason.MISSING_FIELD, "type: field required"
    if kind in ("dict_type", "model_attributes_type") and not first["loc"]:
        return Reason.WRONG_TYPE, "line is not a JSON object"

    def describe(e: Any) -> str:
        loc = e["loc"][1:] if e["loc"] and e["loc"][0] in EVENT_TYPES else e["loc"]
        msg = "field required" if e["type"] == "missing" else e["msg"]
        return f"{_loc(loc)}: {msg}" if loc else msg

    detail = "; ".join(describe(e) for e in errors[:3])
    if len(errors) > 3:
        detail += f" (+{len(errors) - 3} more)"
    if kind in ("missing", MISSING_ERROR):
        return Reason.MISSING_FIELD, detail
    if kind.endswith("_type"):
        return Reason.WRONG_TYPE, detail
    return Reason.INVALID_VALUE, detail
