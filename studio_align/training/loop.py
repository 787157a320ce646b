"""The train loop every trainer shares.

`train_loop(model, run_cfg, step)` trains any flax NNX module under one run config; the
`step` says what one step does to the weights: `supervised(loss_fn, batches)` for a loss
over a batch source (SFT, the DPO family, KTO, the reward model, flow matching),
`grpo.GRPOStep` for a rollout and its updates.

Design choices:
- The loop owns the run, the step only the update: the train state (`state.py`: the
  split `(graphdef, params, rest)` placed on the mesh, the optimizer and its schedule,
  `steps * step.updates_per_step` updates long), progress, finiteness checks, metrics,
  evaluation, checkpoints and resume are written once, here.
- Checkpoints hold params, rest, optimizer state and a record with the step (which is
  also the data position: batch sources are step-indexed) plus the step's own record
  (GRPO's sampling RNGs and controller states). A run resumes from the latest checkpoint
  in its directory unless `checkpoint.resume = false`.
- With `[optim] ema_decay`, evaluation and the model handed back use the moving average
  of the weights (`ema.py`), which lives in `opt_state` and so in every checkpoint.
- Metrics stay on the device and are averaged over each `log_every` window on the host,
  so the device is only synchronised when something is logged or checkpointed (a
  diverged model is never checkpointed).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import jax
import numpy as np
from flax import nnx

from studio_align.errors import TrainingError
from studio_align.training.distributed import (
    await_peer_verdict,
    is_main_process,
    maybe_initialize,
)
from studio_align.training.ema import exported
from studio_align.training.metrics import MetricsLogger
from studio_align.training.progress import Progress
from studio_align.training.run_config import TrainConfig as TrainConfig
from studio_align.training.run_config import TrainRunConfig as TrainRunConfig
from studio_align.training.state import TrainState, open_checkpoints

EvalFn = Callable[[nnx.Module], Mapping[str, float]]


@dataclass
class TrainResult:
    """What a finished (or resumed and finished) run reports."""

    step: int
    metrics: dict[str, float]  # last logged training window
    eval_metrics: dict[str, float]  # last evaluation (empty without eval_fn)
    run_dir: Path | None
    checkpoint_dir: Path | None  # None: the run kept no checkpoints
    resumed_from: int | None = None
    compiles: int = 0
    seconds: float = 0.0
    history: list[dict[str, Any]] = field(default_factory=list)


class LoopStep(Protocol):
    """What one step of `train_loop` does to the train state.

    The loop owns the run (placement, the schedule, progress, finiteness checks, logging,
    evaluation, checkpoints and resume); a step owns how the trees change. `supervised`
    (a loss over a batch source) is the usual step; GRPO's (`grpo.GRPOStep`) draws a
    rollout from the current parameters and applies several updates to it.

    - `bind(state, run, total_steps)`: once, before the first step: jit the update
      against the state's graphdef, optimizer and mesh.
    - `step(state, i)`: run step `i` (0-based), replacing `state.params`, `state.rest` and
      `state.opt_state`; the metrics may stay on the device (the loop fetches them at a
      log step).
    - `record(done)`: what besides the trees the step after `done` depends on (sampling
      RNGs, controller states), saved in every checkpoint; `restore(record)` reads it back.
    - `close()`: once at the end, also when a step raised.

    A step may also have a `devices` attribute: the devices the training mesh takes
    (default: all of them; GRPO keeps some for its rollout, `rollout_devices`).
    """

    updates_per_step: int  # optimizer updates in one step: the schedule is steps * this long
    examples_per_step: int  # for `examples_per_s` (known after `bind`)
    compiles: int  # traces of the jitted update

    def bind(self, state: TrainState, run: TrainRunConfig, total_steps: int) -> None: ...

    def step(self, state: TrainState, i: int) -> dict[str, Any]: ...

    def record(self, done: int) -> dict[str, Any]: ...

    def restore(self, record: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


StopFn = Callable[[int, nnx.Module], bool]


def train_loop(
    model: nnx.Module,
    run_cfg: TrainRunConfig,
    step: LoopStep,
    *,
    eval_fn: EvalFn | None = None,
    wrt: Any = nnx.Param,
    name: str = "train",
    total_steps: int | None = None,
    stop: StopFn | None = None,
) -> TrainResult:
    """Train `model` in place with `step` (e.g. `supervised(loss_fn, batches)`) under
    `run_cfg` (`[train]`, `[optim]`, `[mesh]`, `[checkpoint]`, `[distributed]`); return
    the final metrics and where checkpoints are.

    `eval_fn(model) -> {name: float}` runs every `train.eval_every` steps and at the end;
    its metrics are logged as `eval/<name>`. `stop(step, model) -> bool`, asked after
    every step, ends the run early (that step is logged; no final checkpoint is saved).
    Without `run_dir` nothing is written (no metrics file, no checkpoints unless
    `checkpoint.dir`); `TrainResult.history` holds the logged windows either way.

    The model's arrays are donated to the jitted step and written back at the end, so
    the model is unusable while the loop runs (and if it raises midway).
    """
    maybe_initialize(run_cfg.distributed)
    t_start = time.perf_counter()
    tc = run_cfg.train
    steps = total_steps or tc.total_steps(getattr(step, "steps_per_epoch", None))
    ups = step.updates_per_step
    state = TrainState.create(model, run_cfg.optim, steps * ups, run_cfg.mesh, wrt=wrt,
                              devices=getattr(step, "devices", None), name=name)  # fmt: skip
    step.bind(state, run_cfg, steps)
    run_dir = None if run_cfg.run_dir is None else Path(run_cfg.run_dir)
    ck = run_cfg.checkpoint
    ckpts = None
    if ck.enabled and (run_dir is not None or ck.dir is not None):
        ckpts = open_checkpoints(ck, run_dir or Path("."), total_steps=steps, run=name)
    main = is_main_process()
    logger = None
    if main and run_dir is not None:
        logger = MetricsLogger(run_dir, name, fire_hook=tc.metrics_hook)
    start, resumed_from = 0, None
    if ckpts is not None and ckpts.latest is not None:
        record = ckpts.restore(state)
        start = resumed_from = int(record["data_position"])
        step.restore(record)
    if logger is not None:
        logger.resume_at(start)  # a fresh start empties it; a resume drops steps > start

    progress = Progress(steps, start=start, stage=name, enabled=tc.progress and main)
    window: list[Any] = []
    last: dict[str, float] = {}
    last_eval: dict[str, float] = {}
    history: list[dict[str, Any]] = []
    t_window = time.perf_counter()

    def current() -> nnx.Module:
        return nnx.merge(state.graphdef, exported(state.params, state.opt_state), state.rest)

    def log(s: int, metrics: dict[str, Any]) -> None:
        history.append(logger.log(s, metrics) if logger is not None else {"step": s, **metrics})

    def evaluate(s: int) -> None:
        nonlocal last_eval
        if eval_fn is None:
            return
        with progress.waiting("evaluating"):
            em = {f"eval/{k}": float(v) for k, v in eval_fn(current()).items()}
        last_eval = {k[5:]: v for k, v in em.items()}
        log(s, em)

    end = steps
    try:
        for i in range(start, steps):
            if i == start:  # the first call compiles, which can outlast a heartbeat interval
                with progress.waiting("compiling the train step"):
                    metrics = step.step(state, i)
            else:
                metrics = step.step(state, i)
            window.append(metrics)
            s = i + 1
            stopped = stop is not None and stop(s, current())
            if s % tc.log_every == 0 or s == steps or stopped:
                host = jax.device_get(window)
                check_finite(host, s, name)
                dt = time.perf_counter() - t_window
                last = {k: float(np.mean([m[k] for m in host])) for k in host[0]}
                last["lr"] = float(state.schedule(s * ups - 1))
                last["steps_per_s"] = len(host) / dt if dt > 0 else 0.0
                last["examples_per_s"] = last["steps_per_s"] * step.examples_per_step
                window, t_window = [], time.perf_counter()
                log(s, last)  # every process keeps the history; process 0 writes the file
                progress.update(s, {"loss": last["loss"]} if "loss" in last else None)
            else:
                progress.update(s)
            if stopped:
                end = s
                break
            if eval_fn is not None and tc.eval_every and s % tc.eval_every == 0 and s != steps:
                evaluate(s)
            if ckpts is not None and ckpts.checkpointer.should_save(s, final=s == steps):
                check_finite(jax.device_get(window), s, name)  # never checkpoint a diverged model
                record = {
                    "step": s,
                    "data_position": s,
                    "seed": tc.seed,
                    "total_steps": steps,
                    "run": name,
                    "metrics": last,
                    **step.record(s),
                }
                ckpts.save(s, state.trees(), record)
    except jax.errors.JaxRuntimeError:
        await_peer_verdict()  # a collective that failed because a peer died: its one line
        raise
    finally:
        step.close()
        progress.close()
    if start < end or not last_eval:
        evaluate(end)
    if ckpts is not None:
        ckpts.close()
    nnx.update(model, exported(state.params, state.opt_state), state.rest)
    return TrainResult(
        step=end,
        metrics=last,
        eval_metrics=last_eval,
        run_dir=run_dir,
        checkpoint_dir=None if ckpts is None else ckpts.checkpointer.directory,
        resumed_from=resumed_from,
        compiles=step.compiles,
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
