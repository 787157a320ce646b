"""Prometheus text-format metrics, kept by hand (no client library needed).

Counters by route and status, a latency histogram, a batch-size histogram and the
served model version. Everything is updated from the event loop thread or under a lock.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable

LATENCY_BUCKETS_MS = (1, 2, 5, 10, 20, 30, 50, 75, 100, 200, 500, 1000, 5000)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)


class Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.total += 1
        self.sum += value
        for i, b in enumerate(self.buckets):
            if value <= b:
                self.counts[i] += 1

    def render(self, name: str) -> list[str]:
        lines = [f"# TYPE {name} histogram"]
        for b, c in zip(self.buckets, self.counts, strict=True):
            lines.append(f'{name}_bucket{{le="{b}"}} {c}')
        lines.append(f'{name}_bucket{{le="+Inf"}} {self.total}')
        lines.append(f"{name}_sum {self.sum}")
        lines.append(f"{name}_count {self.total}")
        return lines


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, int], int] = defaultdict(int)
        self.latency = Histogram(LATENCY_BUCKETS_MS)
        self.batch_size = Histogram(BATCH_BUCKETS)
        self.abstains = 0
        self.feedback = 0
        self.reloads = 0
        self.reload_failures = 0
        self.model_version = ""
        self.compile_count: Callable[[], int] | None = None

    def record_request(self, path: str, status: int, latency_ms: float | None = None) -> None:
        with self._lock:
            self.requests[(path, status)] += 1
            if latency_ms is not None and status < 400:
                self.latency.observe(latency_ms)

    def record_batch(self, size: int) -> None:
        with self._lock:
            self.batch_size.observe(size)

    def render(self) -> str:
        with self._lock:
            lines = ["# TYPE studio_align_requests_total counter"]
            for (path, status), n in sorted(self.requests.items()):
                lines.append(f'studio_align_requests_total{{path="{path}",status="{status}"}} {n}')
            lines += self.latency.render("studio_align_route_latency_ms")
            lines += self.batch_size.render("studio_align_batch_size")
            lines.append("# TYPE studio_align_abstain_total counter")
            lines.append(f"studio_align_abstain_total {self.abstains}")
            lines.append("# TYPE studio_align_feedback_total counter")
            lines.append(f"studio_align_feedback_total {self.feedback}")
            lines.append("# TYPE studio_align_reloads_total counter")
            lines.append(f"studio_align_reloads_total {self.reloads}")
            lines.append("# TYPE studio_align_reload_failures_total counter")
            lines.append(f"studio_align_reload_failures_total {self.reload_failures}")
            if self.compile_count is not None:
                lines.append("# TYPE studio_align_decode_compiles gauge")
                lines.append(f"studio_align_decode_compiles {self.compile_count()}")
            lines.append("# TYPE studio_align_model_info gauge")
            lines.append(f'studio_align_model_info{{version="{self.model_version}"}} 1')
            return "\n".join(lines) + "\n"
