"""Warm-up: compile every batch shape before the server calls itself ready.

Design choices:

* The batch sizes a server runs are fixed up front (`batch_buckets`): batches are padded
  to the next bucket, so after warm-up no live request triggers a compile.
* A router with a `warmup(sizes)` method (the real one compiles every prompt-length
  bucket for each batch size) is warmed one batch size at a time, so progress can be
  reported as "n/m shapes"; anything else is warmed by routing a dummy batch of each size.
* Once warm, the heap is frozen (`settle_heap`), so the garbage collector never walks the
  model and JAX's caches again in the middle of a request.
* `Readiness` is the small thread-safe record `/healthz` reads while warm-up runs in a
  worker thread.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Sequence
from typing import Any

WARMUP_REQUEST = {"text": "warm up", "attachments": ["image"]}


def batch_buckets(max_batch: int, buckets: list[int]) -> list[int]:
    """The batch sizes the server runs: the configured buckets below `max_batch`, then it."""
    return sorted({b for b in buckets if 0 < b < max_batch} | {max_batch})


def warm(
    router: Any, sizes: Sequence[int], progress: Callable[[int, int], None] | None = None
) -> None:
    """Compile every batch bucket up front so no live request triggers a compile."""
    fn = getattr(router, "warmup", None)
    total = len(sizes)
    if progress is not None:
        progress(0, total)
    for i, b in enumerate(sizes, start=1):
        if callable(fn):
            fn([b])
        else:
            router.route([dict(WARMUP_REQUEST) for _ in range(b)])
        if progress is not None:
            progress(i, total)


def settle_heap(*, collect: bool) -> None:
    """Put everything alive now (the model, JAX's traces and compiled programs, the app)
    out of the cyclic garbage collector's reach (`gc.freeze`).

    Unfrozen, a full (generation-2) collection walked all of it, an 0.4-0.9 s pause in
    whichever request's allocation triggered it: the max latency at concurrency 8 and the
    p99 at 64. Frozen objects are still freed by reference counting; only cycles among
    them are never collected. At start-up the garbage of loading and warm-up is collected
    first (`collect`); on a reload it is not (a collection would pause live requests), so
    its cycles stay frozen, once per reload."""
    if collect:
        gc.collect()
    gc.freeze()


class Readiness:
    """Warm-up progress of the model being loaded at start-up."""

    def __init__(self, total: int) -> None:
        self._lock = threading.Lock()
        self.done = 0
        self.total = total
        self.error: str | None = None
        self.finished = False

    def update(self, done: int, total: int) -> None:
        with self._lock:
            self.done, self.total = done, total

    def finish(self) -> None:
        with self._lock:
            self.done, self.finished = self.total, True

    def fail(self, reason: str) -> None:
        with self._lock:
            self.error = reason

    def progress(self) -> dict[str, Any]:
        with self._lock:
            frac = self.done / self.total if self.total else 0.0
            return {"shapes_done": self.done, "shapes_total": self.total, "fraction": frac}
