"""A batch of route requests through the served router, and feedback into its memory.

What a platform gets back per request is the plan, a confidence, whether to abstain and
why, and where the plan came from:

* a router that can *decide* (the real `Router` with a calibration or an exemplar memory
  loaded, `Router.decide`) answers with its calibrated confidence, its own abstain
  decision and reason (`low_confidence` or `unfamiliar_request`, thresholds fitted on
  validation and saved with the checkpoint) and the plan's source (`model`,
  `creator_memory`, `population_memory`); the request's `creator` selects that
  creator's exemplars and its `source` (the signing platform) whose creators may vote;
* any other router (`route` only) answers with its raw confidence and source `model`.
The server's `abstain_below`, when set, applies on top of either (reason `low_confidence`).

Feedback: a signed accepted or re-routed event becomes an exemplar at once, so the next
request of that creator can use it without retraining; the memory is a view of the
feedback log, rebuilt with every model load (`learning.py`), never saved by the server.

Design choice: model calls and memory updates are serialised by one lock (`ModelGate`), so a
lookup never sees an exemplar half-added and two JAX calls never contend for the 2 cores.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Routed:
    """One answer of the model: `confidence` is None when it was not finite."""

    plan: list[str]
    confidence: float | None
    version: str
    reason: str | None = None
    source: str = "model"
    decided: bool = False  # True: the router's own calibrated decision (abstain + reason)


def _finite(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def can_decide(router: Any) -> bool:
    """True when the router has calibrated / memory-aware decisions to give."""
    return callable(getattr(router, "decide", None)) and (
        getattr(router, "calibration", None) is not None
        or getattr(router, "memory", None) is not None
    )


class ModelGate:
    """One lock around every call into a router (see module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # also held by the learner while it adds exemplars

    def route(self, router: Any, items: list[dict[str, Any]]) -> list[Routed]:
        """Route `items` (request dicts, optionally with `creator` and `source`) in one model call."""
        requests = [{"text": i["text"], "attachments": i.get("attachments", [])} for i in items]
        with self.lock:
            if can_decide(router):
                creators = [i.get("creator") for i in items]
                sources = [i.get("source") for i in items]
                ds = router.decide(requests, creators=creators, sources=sources,
                                   batch_size=len(requests))  # fmt: skip
                return [
                    Routed(d["plan"], _finite(d["confidence"]), router.version, d["reason"],
                           d["source"], decided=True)
                    for d in ds
                ]  # fmt: skip
            plans, confs = router.route(requests)
        return [Routed(p, _finite(c), router.version) for p, c in zip(plans, confs, strict=True)]
