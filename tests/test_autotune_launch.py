"""How the runner starts trial commands: no Python code between fork and exec.

With JAX imported the process is multithreaded; a `preexec_fn` would make subprocess
fork through Python's at-fork hooks, which JAX answers with a RuntimeWarning (29 of them
in a full test run before this was fixed). These tests run with JAX imported and a live
extra thread, and record every warning.
"""

from __future__ import annotations

import sys
import threading
import warnings

import jax
import jax.numpy as jnp
import pytest

from studio_align.autotune.runner import _call, _launch_argv


@pytest.fixture
def busy_thread():
    """A second live thread, as JAX's own would be."""
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    yield
    stop.set()
    t.join()


def test_no_fork_warning_with_jax_threads(tmp_path, busy_thread):
    jnp.ones(3).block_until_ready()  # JAX's runtime threads exist now
    assert jax.device_count() >= 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc, message = _call(
            [sys.executable, "-c", "print('hello')"],
            tmp_path,
            {"PATH": "/usr/bin:/bin"},
            30.0,
            tmp_path / "log.txt",
            stdout=tmp_path / "out.txt",
        )
    assert not [w for w in caught if "fork" in str(w.message)], [str(w.message) for w in caught]
    assert (rc, message) == (0, "")
    assert (tmp_path / "out.txt").read_text().strip() == "hello"


def test_missing_command_is_named(tmp_path):
    rc, message = _call(
        ["no-such-command-xyz"], tmp_path, {"PATH": "/usr/bin:/bin"}, 30.0, tmp_path / "log.txt"
    )
    assert rc == 127 and "no-such-command-xyz" in message


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
def test_launcher_wraps_the_command_on_linux():
    argv = _launch_argv(["echo", "x"])
    assert argv[0] == sys.executable and argv[-2:] == ["echo", "x"]
