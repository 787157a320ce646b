"""Request and response bodies of the router API.

Limits are part of the contract: text length and batch size are bounded here so a huge
body is a 422 with a reason before any model work is done.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from studio_align.data import schemas as log_schemas

MAX_TEXT_CHARS = 2000
MAX_BATCH = 64
# a request's text holds something besides whitespace: a blank one asks for nothing, yet the
# router would still pick a plan for its attachments (a grade for "   " with an image)
NOT_BLANK = r"\S"


class RouteRequest(log_schemas.RouteRequest):
    """One creator request: text plus the kinds of attachment it came with.

    It *is* the creator log's request (`data.schemas.RouteRequest`: strict types, the same
    attachment kinds), so whatever the server routes a route event can record; the server
    only adds bounds, and refuses unknown keys (a misspelt field is a 422, not ignored).
    """

    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, pattern=NOT_BLANK)
    attachments: list[log_schemas.AttachmentKind] = Field(default_factory=list, max_length=8)
    # who asked: selects that creator's exemplars in the router's memory (docs/router.md)
    creator: str | None = Field(default=None, min_length=1, max_length=200)


class RouteResponse(BaseModel):
    plan: list[str]  # the best plan, also when abstaining (a suggestion to confirm)
    confidence: float
    abstain: bool
    reason: Literal["low_confidence", "unfamiliar_request"] | None = None
    source: Literal["model", "creator_memory", "population_memory"] = "model"
    model_version: str
    latency_ms: float


class BatchRouteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    requests: list[RouteRequest] = Field(min_length=1, max_length=MAX_BATCH)


class BatchRouteResponse(BaseModel):
    results: list[RouteResponse]


EVENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"


class FeedbackRequest(BaseModel):
    """What the platform saw after routing: the plan proposed and what the creator ran.

    `id` is the event id and the idempotency key: posting the same event again (a retry)
    writes nothing the second time. Without an id the server makes one: from the
    signature of a signed post (so a replay after a restart, when the server no longer
    remembers the signatures it saw, is still written once), else at random (a retry
    cannot be recognised).
    """

    model_config = ConfigDict(extra="forbid")
    id: str | None = Field(default=None, pattern=EVENT_ID_PATTERN)
    request: RouteRequest
    proposed: list[str] = Field(min_length=1, max_length=16)
    final: list[str] | None = Field(default=None, max_length=16)  # required when rerouted
    outcome: Literal["accepted", "rerouted", "abandoned"]
    creator: str = Field(min_length=1, max_length=200)
    session: str = Field(min_length=1, max_length=200)

    @model_validator(mode="after")
    def _abandoned_has_no_final(self) -> FeedbackRequest:
        if self.outcome == "abandoned" and self.final is not None:
            raise ValueError("an abandoned route has no final plan: omit `final` or send null")
        return self


class FeedbackResponse(BaseModel):
    id: str
    written: bool = True  # False: an event with this id was already in the log
    # remembered: in the exemplar memory now; pending: logged during warm-up, in the memory
    # once the model is ready; ignored: teaches the memory nothing (unsigned, abandoned,
    # or the memory is off)
    memory: Literal["remembered", "pending", "ignored"] = "ignored"


class ErrorResponse(BaseModel):
    """Every error the server answers with, whatever the status."""

    error: str


class HealthResponse(BaseModel):
    status: Literal["ok", "warming", "degraded", "loading"]
    model_version: str | None = None
    progress: dict[str, Any] | None = None
    reason: str | None = None


class IndexResponse(BaseModel):
    name: str
    version: str
    model: str | None
    links: dict[str, str]


class ReloadRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    checkpoint: str | None = None


class ReloadResponse(BaseModel):
    model_version: str
    previous_version: str
    seconds: float
