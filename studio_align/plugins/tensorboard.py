"""Opt-in plugin: training metrics to TensorBoard (tensorboardX, the `tensorboard` extra).

Enable it like any plugin: `studio-align --plugin studio_align.plugins.tensorboard train
...`, or `STUDIO_ALIGN_PLUGINS=studio_align.plugins.tensorboard`. Each run's numeric
metrics go to `RUN_DIR/tensorboard/`, one scalar per key at the logged step; view them
with `tensorboard --logdir RUN_DIR/tensorboard`.

Design choices:
- It is not a built-in entry point: TensorBoard logging is a choice, and tensorboardX an
  optional dependency, imported when the first metrics arrive, with an error naming the
  extra to install when it is missing.
- One writer per run directory, flushed after every logged step, so a killed run keeps
  what it logged; non-numeric values (the run name) are skipped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from studio_align.errors import PluginError
from studio_align.hookspecs import hookimpl

_writers: dict[str, Any] = {}


def _writer(run_dir: str) -> Any:
    if run_dir not in _writers:
        try:  # optional heavy dependency: only needed once this plugin is enabled
            from tensorboardX import SummaryWriter
        except ImportError as e:
            raise PluginError(
                "tensorboard plugin: tensorboardX is not installed "
                "(pip install 'studio-align[tensorboard]')"
            ) from e
        _writers[run_dir] = SummaryWriter(logdir=str(Path(run_dir) / "tensorboard"))
    return _writers[run_dir]


@hookimpl
def studio_align_on_metrics(run: str, step: int, metrics: Mapping[str, Any], run_dir: str) -> None:
    if not run_dir:
        return
    w = _writer(run_dir)
    for key, value in metrics.items():
        if key in ("step", "time") or isinstance(value, bool):
            continue
        if isinstance(value, int | float) and math.isfinite(value):
            w.add_scalar(f"{run}/{key}", float(value), global_step=step)
    w.flush()


def close_all() -> None:
    """Close every writer (tests; long-lived processes that start many runs)."""
    for w in _writers.values():
        w.close()
    _writers.clear()
