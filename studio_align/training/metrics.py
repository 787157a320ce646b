"""Run metrics: a JSONL file per run and the plugin metrics hook.

Design choices:
- `RUN_DIR/metrics.jsonl` gets one JSON object per logged step (`{"run", "step",
  "time", ...metrics}`); every line is a complete record, so a killed run leaves a
  readable file. On resume, lines past the restored step are dropped, and a fresh start
  empties the file, so a killed and rerun (or resumed) run holds one record per step.
- The same dict goes to `studio_align_on_metrics` through the plugin host. The host is
  looked up lazily and optionally: training works without the plugin system.
- Progress (a tqdm bar on a TTY, heartbeat lines elsewhere) lives in `progress.py`;
  `Progress` is re-exported here for existing imports.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from studio_align.training.progress import Progress

__all__ = ["MetricsLogger", "Progress", "read_metrics"]

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

    def resume_at(self, step: int) -> None:
        """Make the file read as if the run had stopped right after `step`.

        Called once before training: a fresh start (`step == 0`) empties the file (a run
        killed before its first checkpoint left records that would otherwise be logged
        twice); a resume drops the records past the restored step, which the run is about
        to log again. The new file replaces the old in one rename, so a kill during the
        rewrite leaves either the old or the new file, never a half-written one.
        """
        if not self.path.exists():
            return
        keep = []
        if step > 0:
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    if json.loads(line).get("step", 0) <= step:
                        keep.append(line)
                except json.JSONDecodeError:
                    continue  # a torn last line from a killed process
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        with tmp.open("w", encoding="utf-8") as f:
            f.write("".join(k + "\n" for k in keep))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

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
