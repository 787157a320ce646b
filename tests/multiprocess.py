"""Start N JAX processes on localhost as one distributed run (for the multi-process tests).

Each process gets `devices` forced CPU devices and the `[distributed]` settings as
`--set` overrides, so what runs is the public command line (or a test worker) exactly as a
user starts it on a cluster: the same command on every host, differing only by
`process_id`. Output goes to files, never pipes, so a chatty process cannot block on a
full pipe while its peer waits for it in a collective.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from conftest import cpu8_env


@dataclass
class Proc:
    returncode: int
    stdout: str
    stderr: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def distributed_sets(port: int, n: int, i: int, **extra: object) -> list[str]:
    sets = {
        "distributed.enabled": "true",
        "distributed.coordinator_address": f"127.0.0.1:{port}",
        "distributed.num_processes": n,
        "distributed.process_id": i,
        "distributed.initialization_timeout": 120,
        **{f"distributed.{k}": v for k, v in extra.items()},
    }
    return [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]


def launch(
    argv: Sequence[str],
    logs: Path,
    *,
    n: int = 2,
    devices: int = 4,
    env: dict[int, dict[str, str]] | None = None,
    own: Callable[[int], Sequence[str]] = lambda i: (),
    timeout: float = 600,
    **distributed: object,
) -> list[Proc]:
    """Run `argv + [distributed overrides]` as `n` processes; wait for all of them.

    `env[i]` adds variables to process `i` only (e.g. a kill plugin), `own(i)` arguments
    (e.g. its own `run_dir`, to see what each process writes). Processes still
    running after `timeout` seconds are killed and reported with return code -9.
    """
    logs.mkdir(parents=True, exist_ok=True)
    port = free_port()
    procs = []
    for i in range(n):
        out, err = (logs / f"p{i}.out").open("w"), (logs / f"p{i}.err").open("w")
        cmd = [*argv, *own(i), *distributed_sets(port, n, i, **distributed)]
        e = cpu8_env(devices, **(env or {}).get(i, {}))
        procs.append((subprocess.Popen(cmd, env=e, stdout=out, stderr=err), out, err))
    deadline = time.monotonic() + timeout
    results = []
    for i, (p, out, err) in enumerate(procs):
        try:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        out.close()
        err.close()
        results.append(
            Proc(
                p.returncode,
                (logs / f"p{i}.out").read_text(),
                (logs / f"p{i}.err").read_text(),
            )
        )
    return results
