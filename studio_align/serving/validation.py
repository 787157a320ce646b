"""One-line reasons for request validation errors.

The route endpoint takes two forms, a single request or `{"requests": [...]}`, so pydantic
reports a failed body against both. A client sent one of them: an object with a
`requests` key is the batch form, any other object the single form, and only that
form's errors are reported (`attachments[0]: Input should be ...`), never the other's.
"""

from __future__ import annotations

from typing import Any

from fastapi.exceptions import RequestValidationError

from studio_align.serving.schemas import NOT_BLANK

FORMS = {"RouteRequest": "single", "BatchRouteRequest": "batch"}
# what a pattern of the schemas means, said instead of the regular expression
PATTERNS = {NOT_BLANK: "is blank: it must hold something besides whitespace"}


def _attempted(body: Any) -> str | None:
    if not isinstance(body, dict):
        return None
    return "BatchRouteRequest" if "requests" in body else "RouteRequest"


def _loc(parts: list[Any]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def describe_validation_error(exc: RequestValidationError) -> tuple[int, str]:
    """(status, reason): 400 for malformed JSON, else 422 naming each field at fault."""
    errors = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        return 400, "malformed JSON body"
    union = [e for e in errors if len(e.get("loc", ())) > 1 and e["loc"][1] in FORMS]
    if union:
        form = _attempted(getattr(exc, "body", None))
        if form is None:
            return 422, (
                "body must be a JSON object: a request {text, attachments} "
                "or a batch {requests: [...]}"
            )
        errors = [e for e in errors if e not in union or e["loc"][1] == form]
        errors = [{**e, "loc": ("body", *e["loc"][2:])} if e in union else e for e in errors]
    reasons = []
    for e in errors[:5]:
        parts = [p for p in e.get("loc", ()) if p != "body"]
        msg = str(e.get("msg", "invalid")).removeprefix("Value error, ")
        if e.get("type") == "string_pattern_mismatch":
            msg = PATTERNS.get(str(e.get("ctx", {}).get("pattern")), msg)
        reasons.append(f"{_loc(parts) or 'body'}: {msg}")
    if len(errors) > 5:
        reasons.append(f"(+{len(errors) - 5} more)")
    return 422, "; ".join(reasons) or "invalid request"
