"""What every trainer's run config shares beyond `[train]`: the task, the `[model]` it
starts from, the `[data]` records it reads, the run directory, and the result shape.

Design choices:
- The task is named in the config (`task = "router"`, the default) and resolved through
  the plugin host at the edge (`resolve_task`), so the trainers take a task object and
  never import a product.
- `[model]` is one section for every task and algorithm; the task interprets it
  (a preset sized to its tokenizer, a saved bundle to continue, a Hugging Face base).
- `[data]` is a `data compile` output directory or explicit JSONL files; which record
  kind an algorithm reads is the task's `record_kinds[algorithm]`, and every file goes
  through the one validating reader (`data.records`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flax import nnx

from studio_align.catalog import Catalog
from studio_align.config import dump_toml
from studio_align.data.records import compiled_path, read_record_file
from studio_align.errors import ConfigError, DataError
from studio_align.plugins import get_host
from studio_align.tasks import supports
from studio_align.training.distributed import is_main_process, replicated
from studio_align.training.run_config import ModelSection as ModelSection
from studio_align.training.run_config import RecordsSection as RecordsSection


def resolve_task(task: Any, algorithm: str) -> Any:
    """The task object for `task` (a registered name or an object) that supports `algorithm`."""
    obj = get_host().task(task) if isinstance(task, str) else task
    if not supports(obj, algorithm):
        name = getattr(obj, "name", type(obj).__name__)
        raise ConfigError(
            f"task: {name!r} does not support {algorithm} "
            f"(it supports: {', '.join(sorted(getattr(obj, 'algorithms', ()))) or 'nothing'})"
        )
    return obj


def read_split(task: Any, section: RecordsSection, algorithm: str, split: str) -> list[Any]:
    """The records `algorithm` trains on (`split="train"`) or evaluates on (`"heldout"`)."""
    kind = task.record_kinds[algorithm]
    explicit = section.train if split == "train" else section.heldout
    if explicit is not None:
        path = Path(explicit)
    elif section.dir is None:
        if split == "train":
            raise ConfigError("data: set data.dir (a compiled-logs directory) or data.train")
        return []
    else:
        path = compiled_path(section.dir, kind, split)
        if not path.is_file():
            if split == "heldout":
                return []
            raise ConfigError(
                f"data.dir: {path} is missing (run `studio-align data compile` first)"
            )
    # a task with a catalog (the router) has each plan's steps checked as they are read,
    # so an unknown step names its file and line instead of failing in the tokenizer
    catalog = getattr(task, "catalog", None)
    catalog = catalog if isinstance(catalog, Catalog) else None
    records = read_record_file(path, kind, catalog=catalog, steps_only=True)
    if split == "train" and not records:
        raise DataError(f"{path}: no {kind if isinstance(kind, str) else kind.__name__} records")
    return records


def prepare_run_dir(cfg: Any) -> Path:
    """Create `cfg.run_dir` and record the resolved config there (main process only)."""
    if cfg.run_dir is None:
        raise ConfigError("run_dir: this run writes a model and needs a directory")
    run_dir = Path(cfg.run_dir)
    if not str(cfg.run_dir).strip() or run_dir.resolve() == Path.cwd().resolve():
        raise ConfigError("run_dir: empty or the working directory; name a folder for the run")
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"run_dir: {run_dir} exists and is not a directory")
    model = getattr(cfg, "model", None)
    for key in ("init_from", "reference", "base"):
        src = getattr(model, key, None)
        if src is None:
            continue
        src_r, run_r = Path(src).resolve(), run_dir.resolve()
        if src_r == run_r or src_r.is_relative_to(run_r) or run_r.is_relative_to(src_r):
            raise ConfigError(
                f"run_dir: {run_dir} overlaps model.{key} ({src}): a run never writes into "
                "the checkpoint it starts from; choose another run_dir"
            )
    run_dir.mkdir(parents=True, exist_ok=True)
    if is_main_process():
        (run_dir / "config.toml").write_text(dump_toml(cfg), encoding="utf-8")
    return run_dir


@dataclass
class PreferenceResult:
    """What a DPO or KTO run returns."""

    metrics: dict[str, float]  # last logged training window
    heldout_before: dict[str, float]  # held-out figures of the starting point
    heldout_after: dict[str, float]
    checkpoint: Path  # what the task saved (a router checkpoint for the router)
    run_dir: Path
    reference_cache_hit: bool
    train: Any  # the loop's TrainResult


def save_for_task(
    task: Any, start: Any, run_dir: Path, *, trained_by: str, metrics: dict[str, float]
) -> Path:
    """The task saves what it serves to `RUN_DIR/model` (main process only).

    Every process calls it: parameters sharded across processes are first gathered (a
    collective), so process 0 holds the whole model when it writes."""
    path = Path(run_dir) / "model"
    model = getattr(start, "model", None)
    if isinstance(model, nnx.Module):
        nnx.update(model, replicated(nnx.state(model)))
    if is_main_process():
        task.save(start, path, trained_by=trained_by, metrics=metrics)
    return path
