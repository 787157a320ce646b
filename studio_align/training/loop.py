"""The train loop every trainer shares.

`train_loop(model, optim_cfg, loss_fn, batches, run_cfg)` trains any flax NNX module on
any loss `loss_fn(model, batch) -> (loss, metrics)`.

Design choices:
- The model is split once into `(graphdef, params, rest)`: `params` are the trainable
  variables (`wrt`, e.g. `nnx.Param`, or `nnx.LoRAParam` to train adapters only), `rest`
  everything else. One `jax.jit` step takes `(params, rest, opt_state, batch)`, donates
  the first three and returns their replacements with the same fixed shardings: no
  recompiles per step (`TrainResult.compiles` counts traces; tests assert 1).
- A step's batch is `[grad_accum, micro, ...]`, split over the mesh's data and fsdp axes
  on the micro dimension; `accumulate.py` scans over micro-batches (exact).
- Checkpoints hold params, rest, optimizer state and a record with the step (which is
  also the data position: batch sources are step-indexed). A run resumes from the
  latest checkpoint in its directory unless `checkpoint.resume = false`.
- With `[optim] ema_decay`, evaluation and the model handed back use the moving average
  of the weights (`ema.py`), which lives in `opt_state` and so in every checkpoint.
- Metrics are averaged over each `log_every` window on the host, so the device is only
  synchronised when something is logged.
- The train state (placement, donated update, checkpoints, what `resume` means) is
  `state.py`'s, shared with GRPO.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import numpy as np
import optax
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec
from pydantic import Field, model_validator

from studio_align.config import Strict
from studio_align.errors import ConfigError, DataError, TrainingError
from studio_align.models.sharding import (
    BATCH_AXES,
    MeshConfig,
    batch_parallelism,
)
from studio_align.training.accumulate import LossFn, accumulated_grads
from studio_align.training.batches import BatchSource, HostBatch, ModelSource, as_source
from studio_align.training.checkpoint import CheckpointConfig
from studio_align.training.distributed import DistributedConfig, is_main_process, maybe_initialize
from studio_align.training.ema import exported
from studio_align.training.metrics import MetricsLogger
from studio_align.training.optim import OptimConfig
from studio_align.training.progress import Progress
from studio_align.training.state import TrainState, open_checkpoints

EvalFn = Callable[[nnx.Module], Mapping[str, float]]


class TrainConfig(Strict):
    """`[train]`: how long, how big, how often to log and evaluate."""

    steps: int | None = Field(None, ge=1, le=10**9)  # optimizer steps; wins over epochs
    epochs: float | None = Field(None, gt=0)  # needs a source with `steps_per_epoch`
    batch_size: int = Field(16, ge=1, le=1 << 20)  # examples per step (all micro-batches)
    grad_accum: int = Field(1, ge=1)  # micro-batches per step
    seed: int = 0
    log_every: int = Field(10, ge=1)
    eval_every: int = Field(0, ge=0)  # 0: evaluate at the end only (when there is an eval)
    progress: bool = True  # stderr: a bar on a TTY, else a heartbeat line every 20 s
    metrics_hook: bool = True  # fire `studio_align_on_metrics` through the plugin host

    @model_validator(mode="after")
    def _accum_divides(self) -> TrainConfig:
        if self.batch_size % self.grad_accum:
            raise ValueError(
                f"batch_size ({self.batch_size}) must be a multiple of grad_accum ({self.grad_accum})"
            )
        return self

    def total_steps(self, steps_per_epoch: int | None = None) -> int:
        if self.steps is not None:
            return self.steps
        if self.epochs is not None:
            if steps_per_epoch is None:
                raise ConfigError(
                    "train.epochs needs a batch source of known length; set train.steps"
                )
            return max(1, round(self.epochs * steps_per_epoch))
        raise ConfigError("set train.steps or train.epochs")


class TrainRunConfig(Strict):
    """The sections every trainer's run config shares; trainers add `[model]`, `[data]`..."""

    run_dir: Path = Path("runs/run")
    train: TrainConfig = TrainConfig()
    optim: OptimConfig = OptimConfig()
    mesh: MeshConfig = MeshConfig()
    checkpoint: CheckpointConfig = CheckpointConfig()
    distributed: DistributedConfig = DistributedConfig()


@dataclass
class TrainResult:
    """What a finished (or resumed and finished) run reports."""

    step: int
    metrics: dict[str, float]  # last logged training window
    eval_metrics: dict[str, float]  # last evaluation (empty without eval_fn)
    run_dir: Path
    checkpoint_dir: Path
    resumed_from: int | None = None
    compiles: int = 0
    seconds: float = 0.0
    history: list[dict[str, Any]] = field(default_factory=list)


def _slicer(a: np.ndarray) -> Callable[[Any], np.ndarray]:
    return lambda idx: a[idx]


def _packed(name: str, batch: HostBatch) -> bool:
    """Whether `name` belongs to packed rows (`training.packed`: `{prefix}segments` beside
    it), whose row count is the packer's, not the batch size."""
    return any(name.startswith(k[: -len("segments")]) for k in batch if k.endswith("segments"))


def place_batch(batch: HostBatch, accum: int, batch_size: int, mesh: jax.sharding.Mesh) -> dict:
    """One step's host batch as global arrays `[accum, micro, ...]` split over the batch axes.

    Every process holds the same host batch; `jax.make_array_from_callback` copies to each
    of this process's devices only the rows that device owns, so across processes every
    row is fed exactly once (tested by counting rows in two processes).
    """
    out = {}
    split = accum * batch_parallelism(mesh)
    for name, arr in batch.items():
        a = np.asarray(arr)
        packed_ok = _packed(name, batch) and a.ndim and a.shape[0] % split == 0
        if not packed_ok and a.shape[:1] != (batch_size,):
            raise DataError(
                f"batch field {name!r} has shape {a.shape}; expected leading {batch_size}"
            )
        a = a.reshape(accum, a.shape[0] // accum, *a.shape[1:])
        spec = PartitionSpec(None, BATCH_AXES, *([None] * (a.ndim - 2)))
        sharding = NamedSharding(mesh, spec)
        out[name] = jax.make_array_from_callback(a.shape, sharding, _slicer(a))
    return out


def train_loop(
    model: nnx.Module,
    optim_cfg: OptimConfig,
    loss_fn: LossFn,
    batches: BatchSource | ModelSource | Iterable[HostBatch],
    run_cfg: TrainRunConfig,
    *,
    eval_fn: EvalFn | None = None,
    wrt: Any = nnx.Param,
    name: str = "train",
    total_steps: int | None = None,
) -> TrainResult:
    """Train `model` in place; return the final metrics and where checkpoints are.

    `batches` is a step-indexed source `step -> {name: array[batch_size, ...]}` (exact
    resume) or an iterable of such dicts. A source with `reads_model = True` is called
    as `source(step, model)` with the current (not yet donated) weights: on-policy data
    such as PPO's rollouts or a student's own samples, drawn on the host before the step.
    A source with `state_dict()` (JSON) has it saved in every checkpoint's record and
    handed back to its `load_state_dict(state)` on resume (e.g. PPO's KL coefficient).
    `eval_fn(model) -> {name: float}` runs every
    `train.eval_every` steps and at the end; its metrics are logged as `eval/<name>`.

    The model's arrays are donated to the jitted step and written back at the end, so
    the model is unusable while the loop runs (and if it raises midway).
    """
    maybe_initialize(run_cfg.distributed)
    t_start = time.perf_counter()
    tc = run_cfg.train
    reads_model = bool(getattr(batches, "reads_model", False))
    source: Any = batches if reads_model else as_source(batches)
    steps = total_steps or tc.total_steps(getattr(batches, "steps_per_epoch", None))
    state = TrainState.create(model, optim_cfg, steps, run_cfg.mesh, wrt=wrt, name=name)
    graphdef, tx, mesh = state.graphdef, state.tx, state.mesh
    micro = tc.batch_size // tc.grad_accum
    if micro % batch_parallelism(mesh):
        raise ConfigError(
            f"train.batch_size / train.grad_accum = {micro} examples per micro-batch must be a "
            f"multiple of mesh data * fsdp = {batch_parallelism(mesh)}"
        )
    run_dir = Path(run_cfg.run_dir)
    ckpts = open_checkpoints(run_cfg.checkpoint, run_dir, total_steps=steps, run=name)
    main = is_main_process()
    logger = MetricsLogger(run_dir, name, fire_hook=tc.metrics_hook) if main else None
    start, resumed_from = 0, None
    if ckpts.latest is not None:
        record = ckpts.restore(state)
        start = resumed_from = int(record["data_position"])
        if record.get("source") is not None and hasattr(source, "load_state_dict"):
            source.load_state_dict(record["source"])
    if logger is not None:
        logger.resume_at(start)  # a fresh start empties it; a resume drops steps > start

    compiles = 0

    def step_fn(params: Any, rest: Any, opt_state: Any, batch: Any) -> tuple:
        nonlocal compiles
        compiles += 1  # runs once per trace
        metrics, grads, rest = accumulated_grads(loss_fn, wrt, graphdef, params, rest, batch)
        metrics["grad_norm"] = optax.global_norm(grads)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return params, rest, opt_state, metrics

    jstep = state.jit_update(step_fn)
    params, rest, opt_state = state.params, state.rest, state.opt_state
    progress = Progress(steps, start=start, stage=name, enabled=tc.progress and main)
    window: list[Any] = []
    last: dict[str, float] = {}
    last_eval: dict[str, float] = {}
    history: list[dict[str, Any]] = []
    t_window = time.perf_counter()

    def evaluate(step: int) -> None:
        nonlocal last_eval
        if eval_fn is None:
            return
        with progress.waiting("evaluating"):
            em = {
                f"eval/{k}": float(v)
                for k, v in eval_fn(nnx.merge(graphdef, exported(params, opt_state), rest)).items()
            }
        last_eval = {k[5:]: v for k, v in em.items()}
        if logger is not None:
            history.append(logger.log(step, em))

    for step in range(start, steps):
        host_batch = (
            source(step, nnx.merge(graphdef, params, rest)) if reads_model else source(step)
        )
        batch = place_batch(host_batch, tc.grad_accum, tc.batch_size, mesh)
        if step == start:  # the first call compiles, which can outlast a heartbeat interval
            with progress.waiting("compiling the train step"):
                params, rest, opt_state, metrics = jstep(params, rest, opt_state, batch)
        else:
            params, rest, opt_state, metrics = jstep(params, rest, opt_state, batch)
        window.append(metrics)
        s = step + 1
        if s % tc.log_every == 0 or s == steps:
            host = jax.device_get(window)
            check_finite(host, s, name)
            dt = time.perf_counter() - t_window
            last = {k: float(np.mean([m[k] for m in host])) for k in host[0]}
            last["lr"] = float(state.schedule(step))
            last["steps_per_s"] = len(host) / dt if dt > 0 else 0.0
            last["examples_per_s"] = last["steps_per_s"] * tc.batch_size
            window, t_window = [], time.perf_counter()
            if logger is not None:
                history.append(logger.log(s, last))
            progress.update(s, {"loss": last["loss"]})
        else:
            progress.update(s)
        if eval_fn is not None and tc.eval_every and s % tc.eval_every == 0 and s != steps:
            evaluate(s)
        if ckpts.checkpointer.should_save(s, final=s == steps):
            check_finite(jax.device_get(window), s, name)  # never checkpoint a diverged model
            record = {
                "step": s,
                "data_position": s,
                "seed": tc.seed,
                "total_steps": steps,
                "run": name,
                "metrics": last,
            }
            if hasattr(source, "state_dict"):
                record["source"] = source.state_dict()
            ckpts.save(s, {"params": params, "rest": rest, "opt_state": opt_state}, record)
    progress.close()
    if start < steps or not last_eval:
        evaluate(steps)
    ckpts.close()
    nnx.update(model, exported(params, opt_state), rest)
    return TrainResult(
        step=steps,
        metrics=last,
        eval_metrics=last_eval,
        run_dir=run_dir,
        checkpoint_dir=ckpts.checkpointer.directory,
        resumed_from=resumed_from,
        compiles=compiles,
        seconds=time.perf_counter() - t_start,
        history=history,
    )


def check_finite(window: list[dict[str, Any]], step: int, name: str) -> None:
    """Stop at the first non-finite loss or gradient norm of a logging window."""
    for i, m in enumerate(window):
        for key in ("loss", "grad_norm"):
            if key in m and not np.isfinite(float(m[key])):
                at = step - len(window) + i + 1
                raise TrainingError(
                    f"{name}: {key} is {float(m[key])} at step {at}; the run diverged and "
                    "nothing after the last checkpoint was saved (lower optim.learning_rate or "
                    "check the data)"
                )
