"""Multi-process JAX: start-up, the main process, and gathering for what process 0 writes.

On a TPU pod slice (or a GPU cluster under SLURM/Open MPI) every host runs the same
command; with `[distributed] enabled = true` and no addresses, JAX detects the cluster
itself. Elsewhere give `coordinator_address`, `num_processes` and `process_id`.
Initialisation must happen before any other JAX call touches the devices, so trainers
call `maybe_initialize` first thing. See docs/training.md.

Design choices:
- CPU processes (CI, two processes on one machine) exchange collectives through gloo,
  set here before initialisation, so one config runs on CPU, GPU and TPU alike.
- A process that dies is noticed by the others within `heartbeat_timeout` seconds
  (`_Watchdog`, over the coordination service's key-value store): each survivor prints
  one line naming the cause and exits with code 2, so a scheduler restarts the job and
  it resumes from the last checkpoint (orbax writes each one to a temporary folder and
  renames it when complete). JAX's own heartbeat, given twice the time, would end the
  survivors with a fatal C++ log and a stack trace, and its Python hook for that
  (`missed_heartbeat_callback`) cannot be passed through `jax.distributed.initialize`.
  A survivor's collective may also fail at once, as the dead peer's connection drops,
  before the watchdog's time-out; the training loop then waits for the watchdog's
  verdict (`await_peer_verdict`) instead of raising the collective's error, which would
  end in JAX's shutdown barrier waiting for the dead peer and its fatal log.
- Every process computes the same arrays; only process 0 writes files (metrics, the
  model bundle, reports). A parameter sharded across processes is not readable from
  one of them, so writers first call `replicated(tree)` on **every** process (a
  collective), then process 0 reads the now-local copy.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import time
from typing import Any

import jax
from jax.sharding import NamedSharding, PartitionSpec

from studio_align.errors import ConfigError
from studio_align.training.run_config import DistributedConfig as DistributedConfig

_initialized = False


def maybe_initialize(cfg: DistributedConfig) -> bool:
    """Call `jax.distributed.initialize` once if enabled; return whether it is initialised."""
    global _initialized
    if not cfg.enabled or _initialized:
        return _initialized
    if (cfg.process_id is None) != (cfg.num_processes is None):
        raise ConfigError(
            "distributed: set both num_processes and process_id, or neither (auto-detect)"
        )
    if cfg.process_id is not None and cfg.process_id >= (cfg.num_processes or 0):
        raise ConfigError(
            f"distributed.process_id={cfg.process_id}: must be below "
            f"num_processes={cfg.num_processes}"
        )
    jax.config.update("jax_cpu_collectives_implementation", cfg.cpu_collectives)
    jax.distributed.initialize(
        coordinator_address=cfg.coordinator_address,
        num_processes=cfg.num_processes,
        process_id=cfg.process_id,
        local_device_ids=cfg.local_device_ids,
        initialization_timeout=cfg.initialization_timeout,
        # JAX's own detection ends a survivor with a fatal C++ log: let ours come first
        heartbeat_timeout_seconds=2 * cfg.heartbeat_timeout + 10,
        shutdown_timeout_seconds=cfg.shutdown_timeout,
    )
    _start_watchdog(cfg.heartbeat_timeout)
    _initialized = True
    return True


class _Watchdog:
    """Each process bumps a counter in the coordinator's key-value store every second and
    watches the next process's counter (a ring, so N processes make N reads a second, not
    N squared). A counter that stops for `timeout` seconds, a `failed` key set by another
    watchdog, or a coordinator that no longer answers ends this process with one line.
    Counters are compared against this host's clock only, so clock skew cannot matter."""

    PREFIX = "studio_align/watchdog"

    def __init__(self, client: Any, index: int, count: int, timeout: float) -> None:
        self.client, self.index, self.count, self.timeout = client, index, count, timeout
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, name="studio-align-watchdog", daemon=True)

    def run(self) -> None:
        peer = (self.index + 1) % self.count
        beat, seen, since = 0, None, time.monotonic()
        while not self.stop.wait(1.0):
            beat += 1
            try:
                self.client.key_value_set(f"{self.PREFIX}/{self.index}", str(beat), True)
                failed = _try_get(self.client, f"{self.PREFIX}/failed")
                value = _try_get(self.client, f"{self.PREFIX}/{peer}")
            except Exception as e:  # the coordinator (process 0) is gone
                if self.stop.is_set():
                    return
                self.fail(f"the coordinator stopped answering ({_first_line(e)})", tell=False)
                return
            if failed is not None:
                self.fail(failed, tell=False)
                return
            now = time.monotonic()
            if value != seen:
                seen, since = value, now
            elif now - since > self.timeout:
                self.fail(f"process {peer} stopped responding for {self.timeout:g} s", tell=True)
                return

    def fail(self, cause: str, *, tell: bool) -> None:
        if self.stop.is_set():  # a normal exit is under way
            return
        if tell:  # the others may not watch the lost process; tell them
            with contextlib.suppress(Exception):
                self.client.key_value_set(f"{self.PREFIX}/failed", cause, True)
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os.write(2, (peer_lost_message(cause) + "\n").encode())
        os._exit(2)  # JAX's runtime cannot shut down without its peer; nothing else can run


def _try_get(client: Any, key: str) -> str | None:
    try:
        return str(client.key_value_try_get(key))
    except Exception as e:
        if "NOT_FOUND" in str(e) or "not found" in str(e).lower():
            return None
        raise


def _first_line(e: object) -> str:
    return next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)[:200]


def peer_lost_message(cause: str) -> str:
    """The one line a surviving process prints before it exits with code 2."""
    return (
        f"Error: distributed: process {jax.process_index()} stops: {cause}; restart every "
        "process with the same command to resume from the last checkpoint"
    )


_watchdog: _Watchdog | None = None


def await_peer_verdict() -> None:
    """Give the watchdog its time-out (and a margin) to decide whether a peer is lost,
    when a runtime error is about to end this process in a multi-process run: if one is,
    the watchdog ends the process with its one line and code 2; if not, this returns and
    the caller raises its error. At once on one process or after a normal exit began."""
    dog = _watchdog
    if dog is None or dog.stop.is_set():
        return
    dog.thread.join(dog.timeout + 3.0)


def _start_watchdog(timeout: float) -> None:
    global _watchdog
    from jax._src import distributed as jd  # the runtime client: its key-value store

    client = getattr(jd.global_state, "client", None)
    if client is None or jax.process_count() < 2:
        return
    dog = _Watchdog(client, jax.process_index(), jax.process_count(), timeout)
    dog.thread.start()
    _watchdog = dog
    # before JAX's own exit hook (atexit runs last-registered first) shuts the service down
    atexit.register(dog.stop.set)


def is_main_process() -> bool:
    """True on process 0: the one that writes metrics files and model bundles."""
    return jax.process_index() == 0


def replicated(tree: Any) -> Any:
    """`tree` with every array fully replicated on its mesh, so any process can read it.

    A collective: every process must call it, with the same tree. Arrays already readable
    here (one process, or replicated) are returned as they are, at no cost.
    """

    def one(x: Any) -> Any:
        if not isinstance(x, jax.Array) or x.is_fully_addressable or x.is_fully_replicated:
            return x
        mesh = getattr(x.sharding, "mesh", None)
        if mesh is None:
            raise ConfigError(f"an array sharded by {x.sharding} cannot be gathered")
        return jax.jit(lambda a: a, out_shardings=NamedSharding(mesh, PartitionSpec()))(x)

    return jax.tree.map(one, tree)
