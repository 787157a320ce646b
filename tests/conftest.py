"""Shared test fixtures: a fresh plugin host, the 8-CPU-device environment, tiny configs.

Design choices:
- `host` is a fresh `PluginHost` with only studio-align's own plugins (no installed
  third-party entry points, no `STUDIO_ALIGN_PLUGINS` from the caller's shell), made the
  process default for the test and restored afterwards, so a test that registers a
  fake plugin never leaks it into the next one. `empty_host` has no plugins at all.
- XLA's host device count must be set before JAX is imported, and the test process has
  long imported it; so the 8-device setup is an environment for subprocesses
  (`cpu8_env`) plus `run_python_on_8_devices`, never a flag flipped in this process.
- `tiny_model_config` is the engine's smallest preset (`ModelConfig.tiny`): one place to
  change if the tests' model ever needs to change.
- A test (fixtures included) that runs longer than `HEARTBEAT_S` gets a heartbeat line on
  the terminal (`[pytest] tests/x.py::test_y: still running, 0:40 elapsed`), so a long
  fixture is never three silent minutes. It writes to a duplicate of the terminal's
  descriptor taken at session start, which output capture does not swallow.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from studio_align.plugins import PluginHost, using_host
from studio_align.training.progress import heartbeat

ROOT = Path(__file__).resolve().parents[1]


# -- plugin host -----------------------------------------------------------------------------------


@pytest.fixture
def host() -> Iterator[PluginHost]:
    """A fresh host with studio-align's built-in plugins, the process default for the test."""
    h = PluginHost.default(entry_points=False, env={})
    with using_host(h):
        yield h


@pytest.fixture
def empty_host() -> Iterator[PluginHost]:
    """A fresh host with no plugins at all (register fakes on it)."""
    h = PluginHost()
    with using_host(h):
        yield h


# -- 8 CPU devices ---------------------------------------------------------------------------------


def cpu8_env(devices: int = 8, **extra: str) -> dict[str, str]:
    """The environment of a subprocess that sees `devices` forced CPU devices."""
    env = dict(os.environ)
    env.pop("KILL_AT_STEP", None)
    env.pop("STUDIO_ALIGN_PLUGINS", None)
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


@pytest.fixture
def run_python_on_8_devices() -> Callable[..., subprocess.CompletedProcess[str]]:
    """`run(code, timeout=300)`: run Python source in a subprocess with 8 CPU devices."""

    def run(code: str, *, timeout: float = 300, devices: int = 8) -> Any:
        env = cpu8_env(devices)  # tests/ importable too: the code may reuse a test's helpers
        env["PYTHONPATH"] = os.pathsep.join((str(ROOT / "tests"), env["PYTHONPATH"]))
        return subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run


# -- tiny configs ----------------------------------------------------------------------------------


@pytest.fixture
def tiny_model_config() -> Callable[..., Any]:
    """`make(vocab_size, **overrides)`: the engine's tiny preset (d_model 32, 2 layers)."""
    from studio_align.models.config import ModelConfig

    return ModelConfig.tiny


@pytest.fixture
def tiny_train_config() -> Callable[..., Any]:
    """`make(run_dir, **train)`: a `TrainRunConfig` for a few quiet CPU steps."""
    from studio_align.training.loop import TrainRunConfig

    def make(run_dir: Path, **train: Any) -> Any:
        section = {"steps": 4, "batch_size": 8, "progress": False, "metrics_hook": False}
        return TrainRunConfig.model_validate(
            {"run_dir": str(run_dir), "train": {**section, **train}}
        )

    return make


# -- heartbeat for long tests ----------------------------------------------------------------------


class _TerminalStream:
    """A text stream onto the real terminal (a duplicate of stdout's descriptor taken while
    pytest's capture is suspended), so heartbeats written during a test are not captured."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, text: str) -> int:
        if text.strip():
            os.write(self.fd, ("\n" + text.rstrip("\n")).encode())
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


_TERMINAL_FD = pytest.StashKey[int]()


def make_route_workspace(root: Path, *, train_creators: int = 8) -> Path:
    """Compiled route logs of simulated creators and a tiny (untrained) router checkpoint:
    what `train dpo|kto|grpo` need, in `root/compiled` and `root/router`."""
    from flax import nnx

    from studio_align.catalog import default_catalog
    from studio_align.data.compile import compile_logs
    from studio_align.models.config import ModelConfig
    from studio_align.models.transformer import Transformer
    from studio_align.router.checkpoint import save_router
    from studio_align.router.data import write_jsonl
    from studio_align.router.format import build_tokenizer
    from studio_align.simulate.router.creators import demo_creator_data

    data = demo_creator_data(seed=0, n_train_creators=train_creators, n_eval_creators=2)
    logs = write_jsonl(root / "logs" / "routes.jsonl", data["route_logs"])
    compile_logs(logs, root / "compiled", seed=0, heldout_fraction=0.25)
    catalog = default_catalog()
    texts = [e["request"]["text"] for e in data["route_logs"]]
    tok = build_tokenizer(texts, catalog, vocab_size=400)
    model = Transformer(ModelConfig.tiny(tok.vocab_size), rngs=nnx.Rngs(0))
    save_router(root / "router", model, tok, catalog, max_steps=3)
    return root


def add_tiny_router(ws: Path, name: str, *, seed: int, vocab_size: int | None = None) -> Path:
    """Another tiny (untrained) router beside `make_route_workspace`'s, at `ws/name`: the
    same tokenizer and catalog, or (`vocab_size`) a tokenizer of its own."""
    from flax import nnx

    from studio_align.models.config import ModelConfig
    from studio_align.models.transformer import Transformer
    from studio_align.router.checkpoint import save_router
    from studio_align.router.format import build_tokenizer
    from studio_align.router.router import Router

    r = Router.load(ws / "router")
    tok = r.tokenizer
    if vocab_size is not None:
        tok = build_tokenizer(["make a poster", "animate this"], r.catalog, vocab_size=vocab_size)
    model = Transformer(ModelConfig.tiny(tok.vocab_size), rngs=nnx.Rngs(seed))
    save_router(ws / name, model, tok, r.catalog, max_steps=3)
    return ws / name


def pytest_sessionstart(session: pytest.Session) -> None:
    # no real stdout (e.g. a worker process): no beats
    with contextlib.suppress(AttributeError, OSError, ValueError):
        session.config.stash[_TERMINAL_FD] = os.dup(sys.stdout.fileno())


def pytest_sessionfinish(session: pytest.Session) -> None:
    fd = session.config.stash.get(_TERMINAL_FD, None)
    if fd is not None:
        os.close(fd)
        del session.config.stash[_TERMINAL_FD]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    fd = item.config.stash.get(_TERMINAL_FD, None)
    stream = _TerminalStream(fd) if fd is not None else None
    with heartbeat("pytest", item.nodeid, stream=stream, enabled=stream is not None):  # type: ignore[arg-type]
        yield
