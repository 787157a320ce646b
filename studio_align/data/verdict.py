"""Validate-only verdicts on creator-log lines: "certainly valid", or "ask the slow path".

Why: `LogReader.run()` (what `studio-align data validate` runs) needs a verdict per line,
not an event. Here one msgspec decode and one small function per event type decide the
common case, a valid line, schema, cross-field rules and context checks together, in
about 2.5 µs on the shared VM (half of it the decode; the rest is mostly hashing the
line's fresh strings against the sets of known images, steps and ids). Everything else (a line that fails here, for whatever reason) goes to the
reader's full path, which decides it exactly as iteration does (pydantic's reasons and
details, the context checks' messages), so a verdict here can only ever be "valid".

What keeps the verdict exact and cheap:

- **Structs that forbid unknown fields.** msgspec checks the UTF-8 of every string it
  decodes (keys and values) but not of a value it skips, and pydantic refuses invalid
  UTF-8 anywhere. Forbidding unknown fields means nothing is skipped, so no separate UTF-8
  pass is needed on the common line. A line with extra fields (valid for the models)
  gets a second chance from `lenient`: structs that ignore them, after a UTF-8 check.
- **Plans as tuples**, hashable as decoded, so the endorsed plan's check is a lookup in
  the context checks' bounded cache (`ContextChecks.plan_problems`, per plan and
  attachments, which recur far more than whole events do).
- **`ts` parsed by msgspec** (RFC 3339 with a zone, in C): whatever it accepts pydantic
  accepts too, with equal values except fractions beyond microseconds (msgspec rounds,
  pydantic truncates): harmless for a verdict. `tests/test_data_verdict.py` checks a grid
  of shapes.
- **Images** pass only when the reader's context checks already confirmed them for this
  file (`ContextChecks.good`); an image not seen yet goes to the full path, which checks
  it and remembers it.
- `gc=False`: decoded structs cannot form reference cycles, so the collector need not
  track them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from studio_align.data.context import ContextChecks

_S = Annotated[str, Meta(min_length=1)]
_Plan = Annotated[tuple[_S, ...], Meta(min_length=1)]
_AwareTS = Annotated[datetime, Meta(tz=True)]


class _Cand(Struct, forbid_unknown_fields=True, gc=False):
    id: _S
    image: _S


class _Req(Struct, kw_only=True, forbid_unknown_fields=True, gc=False):
    text: str
    attachments: tuple[Literal["image", "video", "audio"], ...] = ()


class _Event(Struct, tag_field="type", kw_only=True, forbid_unknown_fields=True, gc=False):
    id: _S
    ts: _AwareTS
    creator: _S


class _Selection(_Event, tag="selection", kw_only=True):
    session: _S
    prompt: str
    candidates: Annotated[list[_Cand], Meta(min_length=2)]
    chosen: Annotated[list[_S], Meta(min_length=1)]


class _Route(_Event, tag="route", kw_only=True):
    session: _S
    request: _Req
    proposed: _Plan
    final: _Plan | UnsetType | None = UNSET
    outcome: Literal["accepted", "rerouted", "abandoned"]


class _Retouch(_Event, tag="retouch", kw_only=True):
    session: _S | UnsetType | None = UNSET
    image: _S
    before: dict[str, float]
    after: dict[str, float]


class _Rating(_Event, tag="rating", kw_only=True):
    session: _S | UnsetType | None = UNSET
    prompt: str
    image: _S
    label: Literal["up", "down"]


decode = msgspec.json.Decoder(_Selection | _Route | _Retouch | _Rating).decode
DecodeErrors = (msgspec.ValidationError, msgspec.DecodeError)


class _SelectionX(_Selection, tag="selection", forbid_unknown_fields=False):
    """The same events, extra fields ignored (what the models do): `lenient`."""


class _RouteX(_Route, tag="route", forbid_unknown_fields=False): ...


class _RetouchX(_Retouch, tag="retouch", forbid_unknown_fields=False): ...


class _RatingX(_Rating, tag="rating", forbid_unknown_fields=False): ...


_lenient = msgspec.json.Decoder(_SelectionX | _RouteX | _RetouchX | _RatingX).decode
KIND: dict[type, str] = {
    _Selection: "selection", _Route: "route", _Retouch: "retouch", _Rating: "rating",
    _SelectionX: "selection", _RouteX: "route", _RetouchX: "retouch", _RatingX: "rating",
}  # fmt: skip


def lenient(data: bytes) -> Any:
    """`decode` for a line it refused, extra fields allowed: the struct, or None. msgspec
    does not check the UTF-8 of what it skips, so this does first."""
    if not data.isascii():
        try:
            data.decode()
        except UnicodeDecodeError:
            return None
    try:
        return _lenient(data)
    except DecodeErrors:
        return None


class Verdicts:
    """Per event type, a function of a decoded struct: True when the line is certainly
    valid (schema, cross-field rules, context), False when the full path must decide.

    `by_type` maps each struct type to its function, so the reader's loop dispatches with
    one dict lookup. `start_file` follows `ContextChecks.start_file` (image paths are
    relative to each log's folder, so the confirmed images are per file)."""

    def __init__(self, context: ContextChecks) -> None:
        self._context = context
        self._good: set[str] = context.good
        self._steps = context.steps
        self._plan_problems = context.plan_problems  # cached per (plan, attachments)
        by_kind: dict[str, Callable[[Any], bool]] = {
            "selection": self.selection,
            "route": self.route,
            "retouch": self.retouch,
            "rating": self.rating,
        }
        self.by_type: dict[type, Callable[[Any], bool]] = {
            cls: by_kind[kind] for cls, kind in KIND.items()
        }

    def start_file(self) -> None:
        """Call after `ContextChecks.start_file`: its set of confirmed images is new."""
        self._good = self._context.good

    def selection(self, ev: _Selection) -> bool:
        # One plain loop: two comprehensions cost 40% more here (Python 3.11 makes each
        # one a function call).
        good, ids, cands = self._good, set(), ev.candidates
        for c in cands:
            if c.image not in good:
                return False
            ids.add(c.id)
        chosen = set(ev.chosen)
        return len(ids) == len(cands) and len(chosen) == len(ev.chosen) and chosen <= ids

    def route(self, ev: _Route) -> bool:
        proposed, final, outcome = ev.proposed, ev.final, ev.outcome
        if final is UNSET:
            final = None
        if outcome == "accepted":  # the models' rule, then the endorsed plan's steps
            if final is not None and final != proposed:
                return False
            preferred = proposed
        elif outcome == "rerouted":
            if final is None or final == proposed or not self._steps.issuperset(final):
                return False
            preferred = final
        elif final is None:
            preferred = None
        else:
            return False
        if not self._steps.issuperset(proposed):
            return False
        if preferred is None:
            return True
        return not self._plan_problems(preferred, ev.request.attachments)

    def retouch(self, ev: _Retouch) -> bool:
        before, after = ev.before, ev.after
        return bool(after) and before.keys() == after.keys() and ev.image in self._good

    def rating(self, ev: _Rating) -> bool:
        return ev.image in self._good
