"""Fast path for creator-log lines: msgspec decodes, the pydantic models stay the contract.

Why: pydantic's `validate_json` costs ~9 µs a line here and was most of the reader's
time. msgspec decodes and type-checks a line into C structs in ~1-2 µs; the events the
reader yields are still the pydantic models of `schemas.py` (consumers test
`isinstance(ev, RouteEvent)`), built without a second validation pass.

How it stays exact:

- The structs below only **accept** what the pydantic models accept (same strict types,
  literals and minimum lengths; unknown fields ignored by both). Anything they refuse,
  and anything a struct cannot express (a naive or unusual timestamp, the models' cross-field
  rules: unique candidate ids, chosen among candidates, `final` versus `outcome`,
  `before`/`after` keys), returns `None`, and the caller validates that line with the
  full pydantic model. So every error message, reason and quarantine decision is
  pydantic's, and the fast path only ever answers "valid, and here is the event".
- The events built here equal, field for field, what pydantic builds from the same
  line (including `model_fields_set`); `tests/test_data_fastdecode.py` checks this
  differentially on generated, hand-written and mutated lines.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType
from pydantic import BaseModel

from studio_align.data.schemas import (
    Candidate,
    RatingEvent,
    RetouchEvent,
    RouteEvent,
    RouteRequest,
    SelectionEvent,
)

_S = Annotated[str, Meta(min_length=1)]
_Plan = Annotated[list[_S], Meta(min_length=1)]


class _Cand(Struct):
    id: _S
    image: _S


class _Req(Struct, kw_only=True):
    text: str
    attachments: list[Literal["image", "video", "audio"]] | UnsetType = UNSET


class _Event(Struct, tag_field="type", kw_only=True):
    """The fields every event has (the schemas' `_Event`); subclasses set their tag."""

    id: _S
    ts: str
    creator: _S


class SelectionLine(_Event, tag="selection", kw_only=True):
    session: _S
    prompt: str
    candidates: Annotated[list[_Cand], Meta(min_length=2)]
    chosen: Annotated[list[_S], Meta(min_length=1)]


class RouteLine(_Event, tag="route", kw_only=True):
    session: _S
    request: _Req
    proposed: _Plan
    final: _Plan | UnsetType | None = UNSET
    outcome: Literal["accepted", "rerouted", "abandoned"]


class RetouchLine(_Event, tag="retouch", kw_only=True):
    session: _S | UnsetType | None = UNSET
    image: _S
    before: dict[str, float]
    after: dict[str, float]


class RatingLine(_Event, tag="rating", kw_only=True):
    session: _S | UnsetType | None = UNSET
    prompt: str
    image: _S
    label: Literal["up", "down"]


_decode = msgspec.json.Decoder(SelectionLine | RouteLine | RetouchLine | RatingLine).decode
_DecodeError = (msgspec.ValidationError, msgspec.DecodeError)
# RFC 3339 with a zone and at most microseconds: parsed by `fromisoformat` exactly as
# pydantic parses it. Anything else (naive, nanoseconds, other layouts) goes to pydantic.
_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?(?:Z|[+-]\d\d:\d\d)").fullmatch
_parse_ts = datetime.fromisoformat
_EVENT = frozenset(("id", "ts", "creator", "type"))
_CAND_FIELDS = frozenset(("id", "image"))


# pydantic keeps an instance's state in four slots; setting them through the slot
# descriptors skips `object.__setattr__`'s attribute lookup (~4x cheaper per event).
_slots = BaseModel.__dict__
_set_dict = _slots["__dict__"].__set__
_set_fields = _slots["__pydantic_fields_set__"].__set__
_set_extra = _slots["__pydantic_extra__"].__set__
_set_private = _slots["__pydantic_private__"].__set__
_new = object.__new__


def _model(cls: Any, values: dict[str, Any], fields_set: set[str] | frozenset[str]) -> Any:
    """A pydantic instance from values already validated (what `model_construct` does,
    without its per-field default handling: every declared field is in `values`)."""
    m = _new(cls)
    _set_dict(m, values)
    _set_fields(m, set(fields_set))
    _set_extra(m, None)
    _set_private(m, None)
    return m


def _optional(ev: Any, name: str, values: dict[str, Any], fields_set: set[str]) -> None:
    v = getattr(ev, name)
    if v is UNSET:
        values[name] = None
    else:
        values[name] = v
        fields_set.add(name)


def _selection_ok(ev: SelectionLine) -> bool:
    cands, chosen = ev.candidates, ev.chosen
    ids = {c.id for c in cands}
    picked = set(chosen)
    return len(ids) == len(cands) and len(picked) == len(chosen) and picked <= ids


def _route_ok(ev: RouteLine) -> bool:
    final = None if ev.final is UNSET else ev.final
    outcome = ev.outcome
    if outcome == "rerouted":
        return final is not None and final != ev.proposed
    if outcome == "accepted":
        return final is None or final == ev.proposed
    return final is None


def _retouch_ok(ev: RetouchLine) -> bool:
    return bool(ev.after) and ev.before.keys() == ev.after.keys()


def _rating_ok(ev: RatingLine) -> bool:
    return True


def _selection(ev: SelectionLine) -> SelectionEvent:
    cands = [_model(Candidate, {"id": c.id, "image": c.image}, _CAND_FIELDS) for c in ev.candidates]
    values = {
        "id": ev.id,
        "ts": ev.ts,
        "creator": ev.creator,
        "type": "selection",
        "session": ev.session,
        "prompt": ev.prompt,
        "candidates": cands,
        "chosen": ev.chosen,
    }
    return _model(SelectionEvent, values, _EVENT | {"session", "prompt", "candidates", "chosen"})  # type: ignore[no-any-return]


def _route(ev: RouteLine) -> RouteEvent:
    given_final = ev.final is not UNSET
    req = ev.request
    if req.attachments is UNSET:
        request = _model(RouteRequest, {"text": req.text, "attachments": []}, {"text"})
    else:
        request = _model(
            RouteRequest,
            {"text": req.text, "attachments": req.attachments},
            {"text", "attachments"},
        )
    values = {
        "id": ev.id,
        "ts": ev.ts,
        "creator": ev.creator,
        "type": "route",
        "session": ev.session,
        "request": request,
        "proposed": ev.proposed,
        "final": ev.final if given_final else None,
        "outcome": ev.outcome,
    }
    fields = set(_EVENT | {"session", "request", "proposed", "outcome"})
    if given_final:
        fields.add("final")
    return _model(RouteEvent, values, fields)  # type: ignore[no-any-return]


def _retouch(ev: RetouchLine) -> RetouchEvent:
    values: dict[str, Any] = {"id": ev.id, "ts": ev.ts, "creator": ev.creator, "type": "retouch"}
    fields = set(_EVENT | {"image", "before", "after"})
    _optional(ev, "session", values, fields)
    values["image"] = ev.image
    values["before"] = ev.before
    values["after"] = ev.after
    return _model(RetouchEvent, values, fields)  # type: ignore[no-any-return]


def _rating(ev: RatingLine) -> RatingEvent:
    values: dict[str, Any] = {"id": ev.id, "ts": ev.ts, "creator": ev.creator, "type": "rating"}
    fields = set(_EVENT | {"prompt", "image", "label"})
    _optional(ev, "session", values, fields)
    values["prompt"] = ev.prompt
    values["image"] = ev.image
    values["label"] = ev.label
    return _model(RatingEvent, values, fields)  # type: ignore[no-any-return]


LineStruct = SelectionLine | RouteLine | RetouchLine | RatingLine
# per struct class: the models' cross-field rules, the pydantic builder, the event's tag
_RULES: dict[str, tuple[Any, Any]] = {
    "selection": (_selection_ok, _selection),
    "route": (_route_ok, _route),
    "retouch": (_retouch_ok, _retouch),
    "rating": (_rating_ok, _rating),
}
STRUCT_KIND: dict[type, str] = {
    SelectionLine: "selection", RouteLine: "route", RetouchLine: "retouch", RatingLine: "rating",
}  # fmt: skip
_OK: dict[type, Any] = {cls: _RULES[kind][0] for cls, kind in STRUCT_KIND.items()}
_BUILD: dict[type, Any] = {cls: _RULES[kind][1] for cls, kind in STRUCT_KIND.items()}
KIND: dict[type, str] = {
    **STRUCT_KIND,
    SelectionEvent: "selection", RouteEvent: "route", RetouchEvent: "retouch", RatingEvent: "rating",
}  # fmt: skip


def _utf8(data: bytes) -> bool:
    """msgspec skips unknown fields without checking their UTF-8; pydantic does not."""
    if data.isascii():
        return True
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def decode_line(data: bytes) -> LineStruct | None:
    """The msgspec struct of a line that is certainly valid, or `None`: ask pydantic.

    Every schema rule is checked (types, literals, lengths, the models' cross-field rules,
    the timestamp, parsed into `ts`), but no pydantic object is built (`to_event` builds
    it; a reader that only validates uses `verdict.py`, at under half the cost).
    `None` never means invalid, only "not decided here" (see the module docstring)."""
    if not _utf8(data):
        return None
    try:
        ev = _decode(data)
    except _DecodeError:
        return None
    ts = ev.ts
    if _TS(ts) is None:
        return None
    try:
        ev.ts = _parse_ts(ts)  # type: ignore[assignment]
    except ValueError:  # e.g. month 13: pydantic says why
        return None
    return ev if _OK[type(ev)](ev) else None


def to_event(ev: LineStruct) -> SelectionEvent | RouteEvent | RetouchEvent | RatingEvent:
    """The pydantic event of a struct `decode_line` accepted (no second validation)."""
    return _BUILD[type(ev)](ev)  # type: ignore[no-any-return]


def fast_event(data: bytes) -> SelectionEvent | RouteEvent | RetouchEvent | RatingEvent | None:
    """The event of a line that is certainly valid, or `None`: validate it with pydantic.

    `None` never means invalid, only "not decided here" (see the module docstring)."""
    ev = decode_line(data)
    return None if ev is None else _BUILD[type(ev)](ev)  # type: ignore[no-any-return]
