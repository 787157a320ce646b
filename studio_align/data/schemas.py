"""Creator-log schemas (pydantic v2) and the records compiled from them.

A creator log is JSON Lines with one event per line, discriminated by `type`:
`selection`, `route`, `retouch`, `rating` (see docs/design.md "Creator logs").

Design choices:

- Models are **strict**: a JSON number where a string belongs (`"id": 5`) is a wrong
  type, not silently coerced; floats accept JSON integers; `NaN`/`Infinity` are refused.
- Timestamps must carry a timezone (`2026-11-01T10:00:00Z`): a naive time is ambiguous
  across a platform's regions.
- Unknown extra fields are **ignored**, so a platform can log more than we read without
  its lines being quarantined; a misspelt required field still fails as a missing field.
- Cross-field rules live in the models (chosen ids are candidates; `final` is present
  exactly when a route was re-routed; a retouch's `before` and `after` grade the same
  parameters). Rules that need context (engine catalog, image files on disk) are
  checked by the reader, which has that context.
- `EVENT_ADAPTER.validate_json(line)` parses and validates one line in one call (fast:
  the discriminated union dispatches on `type` in Rust).

The compiled records (selection pairs, route DPO pairs, labelled routing examples, KTO
samples, retouch records) are modelled here too, so readers of `data compile` output
parse them with the same types the compiler writes.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    model_validator,
)
from pydantic_core import PydanticCustomError

NonEmptyStr = Annotated[str, StringConstraints(min_length=1)]
AttachmentKind = Literal["image", "video", "audio"]
Plan = Annotated[list[NonEmptyStr], Field(min_length=1)]
Outcome = Literal["accepted", "rerouted", "abandoned"]

# Custom pydantic error types raised by our validators; the reader maps them to reasons.
MISSING_ERROR = "studio_missing"
VALUE_ERROR = "studio_value"


def _missing(msg: str) -> PydanticCustomError:
    return PydanticCustomError(MISSING_ERROR, msg)


def _invalid(msg: str) -> PydanticCustomError:
    return PydanticCustomError(VALUE_ERROR, msg)


class _Model(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True, allow_inf_nan=False)


class RouteRequest(_Model):
    """What the creator asked for: text plus the kinds of attachment they supplied."""

    text: str
    attachments: list[AttachmentKind] = Field(default_factory=list)


class Candidate(_Model):
    id: NonEmptyStr
    image: NonEmptyStr  # relative to the log file (or absolute)


class _Event(_Model):
    id: NonEmptyStr
    ts: AwareDatetime
    creator: NonEmptyStr


class SelectionEvent(_Event):
    """The creator picked `chosen` among generated `candidates` for `prompt`."""

    type: Literal["selection"]
    session: NonEmptyStr
    prompt: str
    candidates: Annotated[list[Candidate], Field(min_length=2)]
    chosen: Annotated[list[NonEmptyStr], Field(min_length=1)]

    @model_validator(mode="after")
    def _check_ids(self) -> SelectionEvent:
        ids = [c.id for c in self.candidates]
        if len(set(ids)) != len(ids):
            raise _invalid("candidate ids are not unique")
        if len(set(self.chosen)) != len(self.chosen):
            raise _invalid("chosen ids are not unique")
        unknown = [c for c in self.chosen if c not in ids]
        if unknown:
            raise _invalid(f"chosen {unknown} not among candidate ids {ids}")
        return self

    @property
    def unchosen(self) -> list[Candidate]:
        return [c for c in self.candidates if c.id not in self.chosen]


class RouteEvent(_Event):
    """The orchestrator proposed a plan; the creator accepted, re-routed or abandoned it."""

    type: Literal["route"]
    session: NonEmptyStr
    request: RouteRequest
    proposed: Plan
    final: Plan | None = None
    outcome: Outcome

    @model_validator(mode="after")
    def _check_outcome(self) -> RouteEvent:
        if self.outcome == "rerouted":
            if self.final is None:
                raise _missing("'final' is required when outcome is 'rerouted'")
            if self.final == self.proposed:
                raise _invalid("outcome 'rerouted' but final plan equals the proposed plan")
        elif self.outcome == "accepted":
            if self.final is not None and self.final != self.proposed:
                raise _invalid("outcome 'accepted' but final plan differs from the proposed plan")
        elif self.final is not None:
            raise _invalid("outcome 'abandoned' must not carry a final plan")
        return self

    @property
    def preferred_plan(self) -> list[str] | None:
        """The plan the creator endorsed: final when re-routed, proposed when accepted."""
        if self.outcome == "rerouted":
            return self.final
        if self.outcome == "accepted":
            return self.proposed
        return None


class RetouchEvent(_Event):
    """The creator graded an image by hand: parameters `before` -> `after`."""

    type: Literal["retouch"]
    session: NonEmptyStr | None = None
    image: NonEmptyStr
    before: dict[str, float]
    after: dict[str, float]

    @model_validator(mode="after")
    def _check_params(self) -> RetouchEvent:
        if not self.after:
            raise _invalid("'after' has no parameters")
        if set(self.before) != set(self.after):
            raise _invalid(
                f"'before' and 'after' grade different parameters: "
                f"{sorted(self.before)} vs {sorted(self.after)}"
            )
        return self


class RatingEvent(_Event):
    """A thumbs up/down on one generated image (an unpaired preference)."""

    type: Literal["rating"]
    session: NonEmptyStr | None = None
    prompt: str
    image: NonEmptyStr
    label: Literal["up", "down"]


Event = Annotated[
    Union[SelectionEvent, RouteEvent, RetouchEvent, RatingEvent],  # noqa: UP007
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[SelectionEvent | RouteEvent | RetouchEvent | RatingEvent] = TypeAdapter(
    Event
)
EVENT_TYPES: tuple[str, ...] = ("selection", "route", "retouch", "rating")


def image_fields(
    event: SelectionEvent | RouteEvent | RetouchEvent | RatingEvent,
) -> list[tuple[str, str]]:
    """(field location, image path as logged) for every image an event refers to."""
    if isinstance(event, SelectionEvent):
        return [(f"candidates[{i}].image", c.image) for i, c in enumerate(event.candidates)]
    if isinstance(event, RetouchEvent | RatingEvent):
        return [("image", event.image)]
    return []


# --------------------------------------------------------------------------------------
# Compiled records (what `data compile` writes; one JSON object per line).
# --------------------------------------------------------------------------------------


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RoutingExample(_Record):
    """A labelled routing example: the request and the plan the creator endorsed."""

    request: RouteRequest
    plan: Plan


class SelectionPair(_Record):
    """Chosen image ≻ rejected image for one prompt. Image paths are absolute."""

    event_id: str
    creator: str
    session: str | None
    prompt: str
    chosen_id: str
    chosen_image: str
    rejected_id: str
    rejected_image: str


class RouteDPOPair(_Record):
    """A re-route: for `request`, plan `chosen` (final) ≻ plan `rejected` (proposed)."""

    event_id: str
    creator: str
    session: str | None
    request: RouteRequest
    chosen: Plan
    rejected: Plan


class KTOSample(_Record):
    """An unpaired sample. `kind="route"`: request+plan; `kind="rating"`: prompt+image."""

    event_id: str
    creator: str
    session: str | None
    kind: Literal["route", "rating"]
    desirable: bool
    request: RouteRequest | None = None
    plan: list[str] | None = None
    prompt: str | None = None
    image: str | None = None


class RetouchRecord(_Record):
    """A creator's grading of one image (behaviour cloning target, and after ≻ before)."""

    event_id: str
    creator: str
    session: str | None
    image: str
    before: dict[str, float]
    after: dict[str, float]


RECORD_MODELS: dict[str, type[_Record]] = {
    "selection_pairs": SelectionPair,
    "route_dpo_pairs": RouteDPOPair,
    "routing_examples": RoutingExample,
    "kto_samples": KTOSample,
    "retouch": RetouchRecord,
}
