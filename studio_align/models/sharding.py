"""Device mesh and sharding rules, described once.

Design choices:
- The mesh has three axes: `data` (pure data parallelism: parameters replicated),
  `fsdp` (fully-sharded data parallelism: the batch *and* the parameters are split, and
  XLA all-gathers each weight where it is used) and `model` (tensor parallelism: the
  attention heads, the MLP's hidden units and the vocabulary are split, the batch is
  not; XLA inserts the reductions). A batch is split over `data` and `fsdp`. Sizes of 1
  cost nothing, so the replicated, FSDP and FSDP + TP layouts are the same code.
- Parameters annotated with logical axis names (`nnx.Param(..., out_sharding=("embed",
  "mlp"))`, or `nnx.with_partitioning`) map to mesh axes through `LOGICAL_RULES`; a
  parameter without annotations is sharded by a shape rule: its largest dimension that
  the `fsdp` size divides goes over `fsdp`. Small tensors (fewer than `min_shard_size`
  elements) and dimensions that do not divide stay replicated. Either way the result is
  a `NamedSharding` per leaf, fixed for the whole run, so the jitted step never
  recompiles and code correct on one device is correct on eight.
- Optimizer state leaves that mirror a parameter (Adam moments) get that parameter's
  sharding (`optax.tree_map_params`); the rest (step counts) are replicated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from studio_align.errors import ConfigError
from studio_align.models.mesh_config import MeshConfig as MeshConfig

DATA, FSDP, MODEL = "data", "fsdp", "model"
BATCH_AXES = (DATA, FSDP)
MESH_AXES = (DATA, FSDP, MODEL)

# Logical axis name -> mesh axis (None: replicated). The only place sharding is decided.
LOGICAL_RULES: Mapping[str, str | tuple[str, ...] | None] = {
    "batch": BATCH_AXES,
    "embed": FSDP,
    "vocab": MODEL,
    "mlp": MODEL,
    "heads": MODEL,
    "kv": MODEL,
    "kv_heads": None,
    "head_dim": None,
    "lora_rank": None,
    "layers": None,
}


def make_mesh(cfg: MeshConfig, devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A `(data, fsdp, model)` mesh over `devices` (default: all devices of all processes).

    `model` varies fastest, then `fsdp`: with devices in process order, tensor-parallel
    groups (the most traffic) sit on one host, and `data` spans hosts."""
    devs = list(devices) if devices is not None else jax.devices()
    n = len(devs)
    inner = cfg.fsdp * cfg.model
    data = cfg.data if cfg.data != -1 else n // inner
    if data < 1 or data * inner != n:
        raise ConfigError(
            f"mesh.data={cfg.data}, mesh.fsdp={cfg.fsdp}, mesh.model={cfg.model}: "
            f"data * fsdp * model must equal the {n} available device(s)"
        )
    grid = np.asarray(devs, dtype=object).reshape(data, cfg.fsdp, cfg.model)
    return Mesh(grid, MESH_AXES)


def batch_parallelism(mesh: Mesh) -> int:
    """How many ways a batch is split (data * fsdp)."""
    return int(mesh.shape[DATA] * mesh.shape[FSDP])


def batch_sharding(mesh: Mesh, ndim: int, *, batch_dim: int = 0) -> NamedSharding:
    """Sharding for an array whose `batch_dim` is the example axis."""
    spec: list[Any] = [None] * ndim
    spec[batch_dim] = BATCH_AXES
    return NamedSharding(mesh, PartitionSpec(*spec))


def _used(mesh: Mesh, axes: str | tuple[str, ...] | None) -> str | tuple[str, ...] | None:
    """`axes` without the mesh's size-1 axes (which split nothing), None when none is left."""
    names = () if axes is None else (axes,) if isinstance(axes, str) else axes
    kept = tuple(a for a in names if mesh.shape[a] > 1)
    return None if not kept else kept[0] if len(kept) == 1 else kept


def _divides(mesh: Mesh, axes: str | tuple[str, ...] | None, size: int) -> bool:
    if axes is None:
        return True
    names = (axes,) if isinstance(axes, str) else axes
    return size % int(np.prod([mesh.shape[a] for a in names])) == 0


def spec_for(
    mesh: Mesh, shape: tuple[int, ...], logical: Sequence[str | None] | None, min_size: int
) -> PartitionSpec:
    """PartitionSpec for one parameter from its logical names, else from its shape."""
    if not shape or int(np.prod(shape)) < min_size:
        return PartitionSpec()
    if logical:
        out = []
        for name, size in zip(logical, shape, strict=True):
            axes = _used(mesh, LOGICAL_RULES.get(name)) if name is not None else None
            out.append(axes if _divides(mesh, axes, size) else None)
        return PartitionSpec(*out)
    fsdp = mesh.shape[FSDP]
    if fsdp == 1:
        return PartitionSpec()
    order = sorted(range(len(shape)), key=lambda i: (-shape[i], i))
    for i in order:
        if shape[i] % fsdp == 0:
            spec: list[Any] = [None] * len(shape)
            spec[i] = FSDP
            return PartitionSpec(*spec)
    return PartitionSpec()


def _logical_names(var: nnx.Variable) -> Sequence[str | None] | None:
    meta = var.get_metadata()
    names = meta.get("out_sharding") or meta.get("sharding_names") or meta.get("sharding")
    if names and all(isinstance(n, str | type(None)) for n in names):
        return tuple(names)
    return None


def state_sharding(mesh: Mesh, state: Any, cfg: MeshConfig) -> Any:
    """A tree of `NamedSharding`s matching `state` (an `nnx.State` or any pytree)."""

    def one(x: Any) -> Any:
        if isinstance(x, nnx.Variable):
            value = x.get_value()
            spec = spec_for(mesh, tuple(np.shape(value)), _logical_names(x), cfg.min_shard_size)
            return x.replace(NamedSharding(mesh, spec))
        return NamedSharding(mesh, spec_for(mesh, tuple(np.shape(x)), None, cfg.min_shard_size))

    return jax.tree.map(one, state, is_leaf=lambda x: isinstance(x, nnx.Variable))


def opt_state_sharding(
    mesh: Mesh, tx: optax.GradientTransformation, opt_state: Any, param_sharding: Any
) -> Any:
    """Optimizer-state shardings: a parameter's sharding for its moments, else replicated."""
    replicated = NamedSharding(mesh, PartitionSpec())
    try:
        return optax.tree_map_params(
            tx,
            lambda _, s: s,
            opt_state,
            param_sharding,
            transform_non_params=lambda _: replicated,
        )
    except Exception:  # an optimizer whose state does not mirror params (adafactor)
        return jax.tree.map(
            lambda x: NamedSharding(mesh, spec_for(mesh, tuple(np.shape(x)), None, 1 << 62)),
            opt_state,
        )
