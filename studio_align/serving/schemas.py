"""Request and response bodies of the router API.

Limits are part of the contract: text length and batch size are bounded here so a huge
body is a 422 with a reason before any model work is done.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from studio_align.catalog import ATTACHMENT_KINDS

MAX_TEXT_CHARS = 2000
MAX_BATCH = 64

Attachment = Literal["image", "video", "audio"]
assert set(ATTACHMENT_KINDS) == {"image", "video", "audio"}


class RouteRequest(BaseModel):
    """One creator request: text plus the kinds of attachment it came with."""

    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    attachments: list[Attachment] = Field(default_factory=list, max_length=8)


class RouteResponse(BaseModel):
    plan: list[str]
    confidence: float
    abstain: bool
    model_version: str
    latency_ms: float


class BatchRouteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    requests: list[RouteRequest] = Field(min_length=1, max_length=MAX_BATCH)


class BatchRouteResponse(BaseModel):
    results: list[RouteResponse]


class FeedbackRequest(BaseModel):
    """What the platform saw after routing: the plan proposed and what the creator ran."""

    model_config = ConfigDict(extra="forbid")
    request: RouteRequest
    proposed: list[str] = Field(min_length=1, max_length=16)
    final: list[str] | None = Field(default=None, max_length=16)  # required when rerouted
    outcome: Literal["accepted", "rerouted", "abandoned"]
    creator: str = Field(min_length=1, max_length=200)
    session: str = Field(min_length=1, max_length=200)


class FeedbackResponse(BaseModel):
    id: str
    written: bool = True


class ReloadRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    checkpoint: str | None = None


class ReloadResponse(BaseModel):
    model_version: str
    previous_version: str
    seconds: float
