"""One train state for every trainer: split, shard, optimise, checkpoint, resume.

`train_loop` builds it once for every trainer (SFT, DPO, KTO, the reward model, GRPO),
so placement, the donated jitted update and what `resume` means are written once.

Design choices:
- The model is split once into `(graphdef, params, rest)`: `params` are the trainable
  variables (`wrt`: `nnx.Param`, or `nnx.LoRAParam` to train adapters only), `rest`
  everything else. Parameters are placed by their logical axes on the mesh; one device is
  the 1 x 1 case of the same code.
- `jit_update(fn)` compiles `fn(params, rest, opt_state, batch) -> (params, rest,
  opt_state, metrics)` with the three states donated and their shardings fixed, so a
  step never recompiles and never holds two copies of the weights.
- `open_checkpoints` fixes what a run directory means, for every trainer alike: an empty
  one starts fresh; one with checkpoints continues from the latest when
  `checkpoint.resume = true` and is refused otherwise; a *finished* run is reported as
  finished instead of silently training 0 steps.
- After each checkpoint the plugin host's `studio_align_on_checkpoint` hook fires (after
  the save is on disk), which is how a test injects a SIGKILL at a chosen step.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from studio_align.errors import CheckpointError, ConfigError
from studio_align.models.sharding import MeshConfig, make_mesh, opt_state_sharding, state_sharding
from studio_align.plugins import get_host
from studio_align.training.checkpoint import CheckpointConfig, Checkpointer
from studio_align.training.optim import OptimConfig, make_optimizer


@dataclass
class TrainState:
    """The arrays a trainer updates, their shardings, and the optimizer."""

    graphdef: Any
    params: Any
    rest: Any
    opt_state: Any
    mesh: jax.sharding.Mesh
    shardings: tuple[Any, Any, Any]  # params, rest, opt_state
    tx: Any
    schedule: Callable[[Any], Any]
    wrt: Any

    @classmethod
    def create(
        cls,
        model: nnx.Module,
        optim: OptimConfig,
        total_updates: int,
        mesh_cfg: MeshConfig | None = None,
        *,
        wrt: Any = nnx.Param,
        devices: Sequence[jax.Device] | None = None,
        name: str = "train",
    ) -> TrainState:
        """Split `model`, place it on the mesh and initialise the optimizer there."""
        mesh_cfg = mesh_cfg or MeshConfig.model_validate({})
        mesh = make_mesh(mesh_cfg, devices)
        tx, schedule = make_optimizer(optim, total_updates)
        parts: tuple[Any, ...] = nnx.split(model, wrt, ...)
        graphdef, params, rest = parts
        if not jax.tree.leaves(params):
            raise ConfigError(f"{name}: the model has no trainable variables for filter {wrt!r}")
        p_shard = state_sharding(mesh, params, mesh_cfg)
        r_shard = state_sharding(mesh, rest, mesh_cfg)
        params = jax.device_put(params, p_shard)
        rest = jax.device_put(rest, r_shard)
        o_shard = opt_state_sharding(mesh, tx, jax.eval_shape(tx.init, params), p_shard)
        opt_state = jax.jit(tx.init, out_shardings=o_shard)(params)
        return cls(graphdef, params, rest, opt_state, mesh, (p_shard, r_shard, o_shard), tx,
                   schedule, wrt)  # fmt: skip

    @property
    def replicated(self) -> NamedSharding:
        return NamedSharding(self.mesh, PartitionSpec())

    def jit_update(
        self, fn: Callable[..., tuple], *, donate: tuple[int, ...] = (0, 1, 2)
    ) -> Callable[..., tuple]:
        """`fn(params, rest, opt_state, batch) -> (params, rest, opt_state, metrics)`
        jitted with the states donated (`donate`: a sampler still reading the parameters
        keeps them, donating the optimizer state only)."""
        return jax.jit(fn, donate_argnums=donate, out_shardings=(*self.shardings, self.replicated))

    def trees(self) -> dict[str, Any]:
        return {"params": self.params, "rest": self.rest, "opt_state": self.opt_state}

    def set_trees(self, trees: Mapping[str, Any]) -> None:
        self.params, self.rest, self.opt_state = trees["params"], trees["rest"], trees["opt_state"]

    def model(self) -> nnx.Module:
        """A module view of the current arrays (for evaluation and sampling)."""
        return nnx.merge(self.graphdef, self.params, self.rest)


@dataclass
class RunCheckpoints:
    """A run's checkpointer plus where the run stands in it."""

    checkpointer: Checkpointer
    latest: int | None  # the step to resume from (None: start fresh)
    run: str

    def restore(self, state: TrainState) -> dict[str, Any]:
        """Load the latest checkpoint into `state`; returns its record."""
        assert self.latest is not None
        trees, record = self.checkpointer.restore(self.latest, state.trees())
        state.set_trees(trees)
        return record

    def save(self, step: int, trees: Mapping[str, Any], record: Mapping[str, Any]) -> None:
        """Save, then tell `studio_align_on_checkpoint` plugins once it is on disk."""
        self.checkpointer.save(step, trees, record)
        host = get_host()
        if host.has_checkpoint_hooks():
            self.checkpointer.wait()
            host.fire_checkpoint(
                run=self.run, step=step, directory=str(self.checkpointer.directory)
            )

    def close(self) -> None:
        self.checkpointer.wait()
        self.checkpointer.close()


def open_checkpoints(
    cfg: CheckpointConfig, run_dir: str | Path, *, total_steps: int, run: str
) -> RunCheckpoints:
    """The run's checkpoints, with `resume` meaning the same for every trainer."""
    directory = Path(cfg.dir or Path(run_dir) / "checkpoints")
    if directory.exists() and not directory.is_dir():
        raise CheckpointError(f"checkpoint.dir {directory}: exists and is not a directory")
    ckpt = Checkpointer(directory, every=cfg.every, keep=cfg.keep, async_save=cfg.async_save)
    latest = ckpt.latest_step()
    if latest is not None and not cfg.resume:
        ckpt.close()
        raise CheckpointError(
            f"{directory} already holds a run (latest checkpoint: step {latest} of "
            f"{total_steps}); set checkpoint.resume = true to continue it, or choose another "
            "run_dir"
        )
    if latest is not None and latest >= total_steps:
        print(
            f"{run}: {directory} holds a finished run (step {latest} of {total_steps}); "
            "nothing to train, loading its final state",
            file=sys.stderr,
        )
    return RunCheckpoints(ckpt, latest, run)
