"""The supervised step of `train_loop`: a loss over a step-indexed batch source.

`supervised(loss_fn, batches)` trains any flax NNX module on any loss
`loss_fn(model, batch) -> (loss, metrics)`; SFT, the DPO family, KTO, the reward model
and flow matching all train this way.

Design choices:
- One `jax.jit` step takes `(params, rest, opt_state, batch)`, donates the first three
  and returns their replacements with the same fixed shardings: no recompiles per step
  (`compiles` counts traces; tests assert 1).
- A step's batch is `[grad_accum, micro, ...]`, split over the mesh's data and fsdp axes
  on the micro dimension; `accumulate.py` scans over micro-batches (exact).
- Batch sources are step-indexed (`batches.py`), so the data position saved in a
  checkpoint is the step itself. A source with `reads_model = True` is called as
  `source(step, model)` with the current (not yet donated) weights: on-policy data such
  as PPO's rollouts or a student's own samples, drawn on the host before the update. A
  source with `state_dict()` (JSON) has it saved in every checkpoint's record and handed
  back to its `load_state_dict(state)` on resume (e.g. PPO's KL coefficient).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import jax
import numpy as np
import optax
from jax.sharding import NamedSharding, PartitionSpec

from studio_align.errors import ConfigError, DataError
from studio_align.models.sharding import BATCH_AXES, batch_parallelism
from studio_align.training.accumulate import LossFn, accumulated_grads
from studio_align.training.batches import BatchSource, HostBatch, ModelSource, as_source
from studio_align.training.state import TrainState

if TYPE_CHECKING:
    from studio_align.training.loop import TrainRunConfig


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


class SupervisedStep:
    """One optimizer update per step on `source(step)` (a `train_loop` step)."""

    updates_per_step = 1

    def __init__(self, loss_fn: LossFn, batches: BatchSource | ModelSource | Iterable[HostBatch]):
        self.loss_fn = loss_fn
        self.reads_model = bool(getattr(batches, "reads_model", False))
        self.source: Any = batches if self.reads_model else as_source(batches)
        self.steps_per_epoch: int | None = getattr(batches, "steps_per_epoch", None)
        self.examples_per_step = 0
        self.compiles = 0
        self._accum = 1
        self._mesh: jax.sharding.Mesh | None = None
        self._update: Callable[..., tuple] | None = None

    def bind(self, state: TrainState, run: TrainRunConfig, total_steps: int) -> None:
        del total_steps
        tc = run.train
        micro = tc.batch_size // tc.grad_accum
        if micro % batch_parallelism(state.mesh):
            raise ConfigError(
                f"train.batch_size / train.grad_accum = {micro} examples per micro-batch must "
                f"be a multiple of mesh data * fsdp = {batch_parallelism(state.mesh)}"
            )
        self.examples_per_step, self._accum, self._mesh = tc.batch_size, tc.grad_accum, state.mesh
        loss_fn, graphdef, tx, wrt = self.loss_fn, state.graphdef, state.tx, state.wrt

        def update(params: Any, rest: Any, opt_state: Any, batch: Any) -> tuple:
            self.compiles += 1  # runs once per trace
            metrics, grads, rest = accumulated_grads(loss_fn, wrt, graphdef, params, rest, batch)
            metrics["grad_norm"] = optax.global_norm(grads)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), rest, opt_state, metrics

        self._update = state.jit_update(update)

    def step(self, state: TrainState, i: int) -> dict[str, Any]:
        assert self._update is not None and self._mesh is not None, "bind() first"
        host = self.source(i, state.model()) if self.reads_model else self.source(i)
        batch = place_batch(host, self._accum, self.examples_per_step, self._mesh)
        state.params, state.rest, state.opt_state, metrics = self._update(
            state.params, state.rest, state.opt_state, batch
        )
        return metrics

    def record(self, done: int) -> dict[str, Any]:
        del done  # the step is the data position; a stateful source saves its own state
        return {"source": self.source.state_dict()} if hasattr(self.source, "state_dict") else {}

    def restore(self, record: Mapping[str, Any]) -> None:
        if record.get("source") is not None and hasattr(self.source, "load_state_dict"):
            self.source.load_state_dict(record["source"])

    def close(self) -> None:
        pass


def supervised(
    loss_fn: LossFn, batches: BatchSource | ModelSource | Iterable[HostBatch]
) -> SupervisedStep:
    """The `train_loop` step that minimises `loss_fn` over `batches`.

    `batches` is a step-indexed source `step -> {name: array[batch_size, ...]}` (exact
    resume), an on-policy `ModelSource` (`source(step, model)`), or an iterable of such
    dicts (fast-forwarded on resume)."""
    return SupervisedStep(loss_fn, batches)
