"""A batch of route requests through the served router, and feedback into its memory.

What a platform gets back per request is the plan, a confidence, whether to abstain and
why, and where the plan came from:

* a router that can *decide* (the real `Router` with a calibration or an exemplar memory
  loaded, `Router.decide`) answers with its calibrated confidence, its own abstain
  decision and reason (`low_confidence` or `unfamiliar_request`, thresholds fitted on
  validation and saved with the checkpoint) and the plan's source (`model`,
  `creator_memory`, `population_memory`); the request's `creator` selects that
  creator's exemplars;
* any other router (`route` only) answers with its raw confidence and source `model`.
The server's `abstain_below`, when set, applies on top of either (reason `low_confidence`).

Feedback: an accepted or re-routed event becomes an exemplar (`Router.remember`) at once,
so the next request of that creator can use it without retraining; the memory is saved
beside the checkpoint when the server stops (`Router.save_state`).

Design choice: model calls and memory updates are serialised by one lock (`ModelGate`), so a
lookup never sees an exemplar half-added and two JAX calls never contend for the 2 cores.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from pathlib import Path
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
        self._lock = threading.Lock()

    def route(self, router: Any, items: list[dict[str, Any]]) -> list[Routed]:
        """Route `items` (request dicts, optionally with `creator`) in one model call."""
        requests = [{"text": i["text"], "attachments": i.get("attachments", [])} for i in items]
        with self._lock:
            if can_decide(router):
                creators = [i.get("creator") for i in items]
                ds = router.decide(requests, creators=creators, batch_size=len(requests))
                return [
                    Routed(d["plan"], _finite(d["confidence"]), router.version, d["reason"],
                           d["source"], decided=True)
                    for d in ds
                ]  # fmt: skip
            plans, confs = router.route(requests)
        return [Routed(p, _finite(c), router.version) for p, c in zip(plans, confs, strict=True)]

    def remember(self, router: Any, event: dict[str, Any], *, pad_to: int = 1) -> bool:
        """Add an accepted / re-routed feedback event to the router's memory; False when the
        router has no memory API or the event carries no plan the creator kept. `pad_to`:
        the server's smallest batch bucket, so embedding it needs no new compile."""
        if event.get("outcome") not in ("accepted", "rerouted"):
            return False
        if not callable(getattr(router, "remember", None)):
            return False
        plan = event.get("final") or event.get("proposed")
        if not plan:
            return False
        with self._lock:
            return bool(
                router.remember([event["request"]], [plan], [event.get("creator")], pad_to=pad_to)
            )

    def save_memory(self, router: Any, directory: str | Path) -> bool:
        """Persist the router's memory beside its checkpoint; False when there is none."""
        memory = getattr(router, "memory", None)
        if memory is None or not len(memory):
            return False
        with self._lock:
            memory.save(directory)
        return True
