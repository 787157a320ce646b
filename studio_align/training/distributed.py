"""Multi-host start-up: `jax.distributed.initialize`, switched on by config.

On a TPU pod slice (or a GPU cluster under SLURM/Open MPI) every host runs the same
command; with `[distributed] enabled = true` and no addresses, JAX detects the cluster
itself. Elsewhere give `coordinator_address`, `num_processes` and `process_id`.
Initialisation must happen before any other JAX call touches the devices, so trainers
call `maybe_initialize` first thing. See docs/training.md.
"""

from __future__ import annotations

import jax
from pydantic import Field

from studio_align.config import Strict

_initialized = False


class DistributedConfig(Strict):
    """`[distributed]`: multi-process JAX. Off by default (one process, all local devices)."""

    enabled: bool = False
    coordinator_address: str | None = None  # "host:port" of process 0; None: auto-detect
    num_processes: int | None = Field(None, ge=1)
    process_id: int | None = Field(None, ge=0)
    local_device_ids: list[int] | None = None
    initialization_timeout: int = Field(300, ge=1)


def maybe_initialize(cfg: DistributedConfig) -> bool:
    """Call `jax.distributed.initialize` once if enabled; return whether it is initialised."""
    global _initialized
    if not cfg.enabled or _initialized:
        return _initialized
    jax.distributed.initialize(
        coordinator_address=cfg.coordinator_address,
        num_processes=cfg.num_processes,
        process_id=cfg.process_id,
        local_device_ids=cfg.local_device_ids,
        initialization_timeout=cfg.initialization_timeout,
    )
    _initialized = True
    return True


def is_main_process() -> bool:
    """True on process 0: the one that writes metrics files and model bundles."""
    return jax.process_index() == 0
