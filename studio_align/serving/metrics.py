"""The server's Prometheus metrics, through `prometheus_client`.

Design choices:

* One `CollectorRegistry` per app (not the process-global one), so two apps in one
  process (tests) never collide and `/metrics` shows only this server.
* **Label values are bounded sets.** A request is labelled with the route *template*
  it matched (`/v1/route`, `/healthz`, ...) or `"unmatched"`, its method (or `"OTHER"`)
  and its status code, never with the raw path: a client cannot add series, and the
  text exposition is escaped by the library, so a path cannot forge a line.
* Times are in seconds (Prometheus convention); every metric has a HELP line.
* The served model version is an info-style gauge that keeps exactly one series: the
  previous version's series is removed on a swap.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

UNMATCHED = "unmatched"
METHODS = frozenset({"GET", "POST", "HEAD", "OPTIONS", "PUT", "DELETE", "PATCH"})
LATENCY_BUCKETS_S = (0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.5, 1, 5)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    """Counters, histograms and gauges of one server; `render()` is the `/metrics` body."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "studio_align_requests",
            "HTTP requests by route template (or 'unmatched'), method and status code.",
            ["route", "method", "status"],
            registry=r,
        )
        self.duration = Histogram(
            "studio_align_request_duration_seconds",
            "Time from request start to the end of the response, by route template.",
            ["route"],
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.route_latency = Histogram(
            "studio_align_route_latency_seconds",
            "Latency of successful /v1/route calls, including batching wait.",
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.batch_size = Histogram(
            "studio_align_batch_size",
            "Requests per model call made by the dynamic batcher (before bucket padding).",
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.abstains = Counter(
            "studio_align_abstain", "Routed requests answered with abstain=true.", registry=r
        )
        self.sources = Counter(
            "studio_align_route_source",
            "Routed requests by where the plan came from: model, creator_memory or "
            "population_memory (the router's own bounded set).",
            ["source"],
            registry=r,
        )
        self.nonfinite = Counter(
            "studio_align_nonfinite_outputs",
            "Routed requests whose confidence was NaN or infinite (the server reports degraded).",
            registry=r,
        )
        self.feedback = Counter(
            "studio_align_feedback", "Route events appended to the feedback log.", registry=r
        )
        self.feedback_duplicates = Counter(
            "studio_align_feedback_duplicates",
            "Feedback posts whose event id was already written (not written again).",
            registry=r,
        )
        self.feedback_failures = Counter(
            "studio_align_feedback_failures",
            "Feedback posts the log could not take (rolled back; answered 503 or 507).",
            registry=r,
        )
        self.auth_failures = Counter(
            "studio_align_auth_failures",
            "Requests refused for missing, wrong or replayed platform signatures.",
            registry=r,
        )
        self.rate_limited = Counter(
            "studio_align_feedback_rate_limited",
            "Feedback posts refused by the per-source or per-creator rate limit (429).",
            registry=r,
        )
        self.reloads = Counter(
            "studio_align_reloads", "Successful model reloads (hot swaps).", registry=r
        )
        self.reload_failures = Counter(
            "studio_align_reload_failures",
            "Reloads refused or failed, by reason.",
            ["reason"],
            registry=r,
        )
        self.warmup_progress = Gauge(
            "studio_align_warmup_progress",
            "Fraction of batch shapes compiled for the model being warmed up (1 when ready).",
            registry=r,
        )
        self.model_info = Gauge(
            "studio_align_model_info", "The served model version (value is always 1).",
            ["version"], registry=r,
        )  # fmt: skip
        self._compiles = Gauge(
            "studio_align_decode_compiles",
            "Traces of the sampler's decode function so far (constant after warm-up).",
            registry=r,
        )
        self._scoring_compiles = Gauge(
            "studio_align_scoring_compiles",
            "Traces of the router's separate scoring pass (calibration and memory inputs; "
            "0 when the decoding pass returns them).",
            registry=r,
        )
        self._xla_compiles = Gauge(
            "studio_align_xla_compiles",
            "XLA programs built in this process, any function (constant after warm-up).",
            registry=r,
        )
        self._lock = threading.Lock()
        self._version: str | None = None

    def set_compile_counter(
        self,
        decode: Callable[[], int],
        scoring: Callable[[], int] | None = None,
        xla: Callable[[], int] | None = None,
    ) -> None:
        """Read the compile counts from these functions at every scrape."""
        for gauge, fn in ((self._compiles, decode), (self._scoring_compiles, scoring),
                          (self._xla_compiles, xla)):  # fmt: skip
            if fn is not None:
                gauge.set_function(_as_float(fn))

    def set_model_version(self, version: str) -> None:
        with self._lock:
            if self._version is not None and self._version != version:
                self.model_info.remove(self._version)
            self._version = version
            self.model_info.labels(version=version).set(1)

    def record_request(self, route: str | None, method: str, status: int, seconds: float) -> None:
        """Count one finished request; `route` is the matched template or None."""
        label = route or UNMATCHED
        self.requests.labels(
            route=label, method=method if method in METHODS else "OTHER", status=str(status)
        ).inc()
        self.duration.labels(route=label).observe(seconds)

    def record_batch(self, size: int) -> None:
        self.batch_size.observe(size)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _as_float(fn: Callable[[], int]) -> Callable[[], float]:
    return lambda: float(fn())
