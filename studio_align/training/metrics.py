"""Run metrics: a JSONL file per run, the plugin metrics hook, and a progress bar.

Design choices:
- `RUN_DIR/metrics.jsonl` gets one JSON object per logged step (`{"run", "step",
  "time", ...metrics}`); every line is a complete record, so a killed run leaves a
  readable file. On resume, lines past the restored step are dropped, so the file reads
  as if the run had never stopped.
- The same dict goes to `studio_align_on_metrics` through the plugin host. The host is
  looked up lazily and optionally: training works without the plugin system.
- The progress bar is plain stderr (`\\r` rewrites), shown only on a TTY, with rate
  and ETA; no tqdm dependency.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from studio_align.plugins import get_host


def _plugin_host() -> Any:
    return get_host()


def _jsonable(v: Any) -> Any:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return v if isinstance(v, str | int | bool) else str(v)
    return f if math.isfinite(f) else None


class MetricsLogger:
    """Writes metrics to `RUN_DIR/metrics.jsonl` and fires the plugin metrics hook."""

    def __init__(self, run_dir: str | Path, run: str, *, fire_hook: bool = True):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.run = run
        self._host = _plugin_host() if fire_hook else None

    def truncate_after(self, step: int) -> None:
        """Drop records with `step > step` (called when resuming from a checkpoint)."""
        if not self.path.exists():
            return
        keep = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                if json.loads(line).get("step", 0) <= step:
                    keep.append(line)
            except json.JSONDecodeError:
                continue  # a torn last line from a killed process
        self.path.write_text("".join(k + "\n" for k in keep), encoding="utf-8")

    def log(self, step: int, metrics: Mapping[str, Any]) -> dict[str, Any]:
        record = {"run": self.run, "step": int(step), "time": round(time.time(), 3)}
        record.update({k: _jsonable(v) for k, v in metrics.items()})
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
        if self._host is not None:
            self._host.fire_metrics(
                run=self.run, step=int(step), metrics=dict(record), run_dir=str(self.path.parent)
            )
        return record


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """All records of `RUN_DIR/metrics.jsonl`, in order."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _fmt_time(s: float) -> str:
    s = int(max(0, s))
    return (
        f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
        if s >= 3600
        else f"{s // 60:02d}:{s % 60:02d}"
    )


class Progress:
    """`name  37%|████      | 370/1000 [00:12<00:20, 30.1 step/s] loss=1.234`."""

    def __init__(
        self,
        total: int,
        *,
        start: int = 0,
        name: str = "train",
        enabled: bool | None = None,
        stream: TextIO | None = None,
    ):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.total, self.start, self.name = total, start, name
        self.t0 = time.perf_counter()
        self._last = 0.0
        self.postfix = ""

    def update(self, step: int, postfix: Mapping[str, float] | None = None) -> None:
        if postfix:
            self.postfix = " ".join(f"{k}={v:.4g}" for k, v in postfix.items())
        now = time.perf_counter()
        if not self.enabled or (now - self._last < 0.1 and step < self.total):
            return
        self._last = now
        done = step - self.start
        elapsed = now - self.t0
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - step) / rate if rate > 0 else float("nan")
        frac = step / max(1, self.total)
        bar = "█" * int(frac * 20)
        eta_s = _fmt_time(eta) if math.isfinite(eta) else "?"
        self.stream.write(
            f"\r{self.name} {frac:4.0%}|{bar:<20}| {step}/{self.total} "
            f"[{_fmt_time(elapsed)}<{eta_s}, {rate:.2f} step/s] {self.postfix}\033[K"
        )
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
