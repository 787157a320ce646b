"""A process-wide count of XLA compilations, by program name (for "no compile after warm-up").

A server that compiles while serving stalls the whole batch for seconds (a 3-layer router's
decode program takes 1-6 s to compile on 2 loaded cores), so "warm-up covers every shape a
request can reach" must be checkable, not assumed. Counting traces of one jitted function
only covers that function; this counts every XLA program JAX builds in the process.

Design choices:
- JAX reports each executable it builds through `jax.monitoring` (the backend-compile
  duration event, with the program's name); a listener counts them. A program loaded
  from the persistent compilation cache counts too: it is still a new shape reaching the
  backend, and on a cold cache it would be a full compile.
- The listener is installed once per process (`install()`, idempotent) and never removed;
  counting is a dict increment under a lock.
"""

from __future__ import annotations

import threading
from collections import Counter

import jax

_EVENT = "/jax/core/compile/backend_compile_duration"
_lock = threading.Lock()
_counts: Counter[str] = Counter()
_installed = False


def _listener(event: str, duration_secs: float, **kwargs: str | int) -> None:
    if event != _EVENT:
        return
    with _lock:
        _counts[str(kwargs.get("fun_name", "?"))] += 1


def install() -> None:
    """Start counting (idempotent); compiles before the first call are not counted."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    jax.monitoring.register_event_duration_secs_listener(_listener)


def total() -> int:
    """XLA programs built since `install()`."""
    with _lock:
        return sum(_counts.values())


def by_program() -> dict[str, int]:
    """The same, per program name (`jit(_generate)`, `jit(_scan)`, ...)."""
    with _lock:
        return dict(_counts)
