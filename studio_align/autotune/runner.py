"""Run one seed of one trial: train, then evaluate, each a subprocess under a hard timeout.

Design choices:
- Training and evaluation are separate commands. Training writes its checkpoint into the
  run directory and the runner drops a `.trained` marker once it exits cleanly, *before*
  evaluation starts; an evaluation that crashes or times out (or a loop killed during
  it) is retried later without retraining, and the held-out confirmation evaluates the
  existing checkpoints of the best trial instead of training them again.
- Each command runs in its own session (process group) so a timeout kills the whole
  tree; on Linux the child also gets SIGKILL if the loop itself dies (PR_SET_PDEATHSIG),
  so a killed loop leaves no orphan trainer writing into a directory it will reuse.
- No Python code runs between fork and exec (no `preexec_fn`): the loop process is
  multithreaded once JAX is imported, and a `preexec_fn` makes subprocess fork through
  Python's at-fork hooks, which JAX answers with a deadlock warning (and which can in
  fact deadlock). Instead the command starts through a small launcher interpreter
  (`_LAUNCHER`) that sets PR_SET_PDEATHSIG on itself and then execs the command; the
  setting survives `execve`, and the launcher checks that its parent is still the loop
  after setting it, closing the race where the loop dies first.
- The metric is read from the evaluate command's JSON on stdout by key (dotted for
  nested objects). Outcomes: `ok`, `crash` (non-zero exit, unreadable output, missing
  metric), `timeout`, `nan` (non-finite metric).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studio_align.autotune.space import Config, Space

TRAINED = ".trained"


@dataclass
class RunResult:
    """The outcome of one (trial, seed, split)."""

    status: str  # ok | crash | timeout | nan
    value: float | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    phase: str = ""  # where it failed: train | eval
    message: str = ""


def run_dir(out: Path, trial: int, seed: int) -> Path:
    return out / "trials" / f"{trial:04d}" / f"seed-{seed}"


class Runner:
    """Runs trials of `space`, writing each under `out/trials/NNNN/seed-S/`."""

    def __init__(self, space: Space, out: str | Path) -> None:
        self.space = space
        self.out = Path(out).resolve()

    def run(
        self,
        trial: int,
        seed: int,
        config: Config,
        *,
        split: str = "validation",
        timeout: float | None = None,
    ) -> RunResult:
        spec = self.space.spec
        timeout = spec.budget.trial_timeout_s if timeout is None else timeout
        data_rel = spec.data.validation if split == "validation" else spec.data.heldout
        if data_rel is None:
            return RunResult("crash", message=f"no data file for split {split!r}")
        rdir = run_dir(self.out, trial, seed)
        start = time.monotonic()
        values = {
            "{trial_dir}": str(rdir),
            "{seed}": str(seed),
            "{data}": str(self.space.path(data_rel)),
            "{base_config}": str(self.space.path(spec.command.base_config))
            if spec.command.base_config
            else "",
            "{python}": sys.executable,
            "{out}": str(self.out),
        }
        env = {
            **os.environ,
            **spec.command.env,
            "STUDIO_ALIGN_AUTOTUNE_TRIAL": str(trial),
            "STUDIO_ALIGN_AUTOTUNE_SEED": str(seed),
        }
        cwd = self.space.path(spec.command.cwd)

        if not (rdir / TRAINED).exists():
            if rdir.exists():  # a half-written run from a killed loop
                shutil.rmtree(rdir)
            rdir.mkdir(parents=True)
            sets = self.space.overrides(config, seed)
            argv = _argv(spec.command.train, values, sets)
            rc, message = _call(argv, cwd, env, timeout, rdir / "train.log")
            if rc is None:
                return RunResult(
                    "timeout",
                    seconds=time.monotonic() - start,
                    phase="train",
                    message=message or f"training exceeded {timeout:g}s",
                )
            if rc != 0:
                return RunResult(
                    "crash", seconds=time.monotonic() - start, phase="train", message=message
                )
            (rdir / TRAINED).write_text(
                json.dumps({"argv": argv, "seconds": time.monotonic() - start}) + "\n"
            )

        remaining = timeout - (time.monotonic() - start)
        if remaining <= 0:
            return RunResult(
                "timeout",
                seconds=time.monotonic() - start,
                phase="eval",
                message=f"no time left for evaluation within {timeout:g}s",
            )
        argv = _argv(spec.command.evaluate, values, [])
        out_path = rdir / f"eval-{split}.json"
        rc, message = _call(argv, cwd, env, remaining, rdir / f"eval-{split}.log", stdout=out_path)
        seconds = time.monotonic() - start
        if rc is None:
            return RunResult(
                "timeout",
                seconds=seconds,
                phase="eval",
                message=message or f"evaluation exceeded the {timeout:g}s budget",
            )
        if rc != 0:
            return RunResult("crash", seconds=seconds, phase="eval", message=message)
        try:
            metrics = parse_json_output(out_path.read_text(encoding="utf-8"))
            raw = lookup_metric(metrics, self.space.metric.name)
            value = math.nan if raw is None else float(raw)
        except (ValueError, KeyError, TypeError) as e:
            return RunResult("crash", seconds=seconds, phase="eval", message=str(e))
        if not math.isfinite(value):
            return RunResult(
                "nan",
                value=None,
                metrics=metrics,
                seconds=seconds,
                phase="eval",
                message=f"{self.space.metric.name} = {value}",
            )
        return RunResult("ok", value=value, metrics=metrics, seconds=seconds)


def _argv(template: str, values: Mapping[str, str], sets: list[str]) -> list[str]:
    argv: list[str] = []
    for arg in shlex.split(template):
        if arg == "{sets}":
            for s in sets:
                argv += ["--set", s]
            continue
        for k, v in values.items():
            arg = arg.replace(k, v)
        argv.append(arg)
    if argv and os.sep not in argv[0] and shutil.which(argv[0]) is None:
        beside = Path(sys.executable).parent / argv[0]  # console scripts of this venv
        if beside.exists():
            argv[0] = str(beside)
    return argv


# Runs as `python -I -S -c _LAUNCHER PARENT_PID ARGV...` in a fresh interpreter (standard
# library only): die with the loop (PR_SET_PDEATHSIG = 1), then become the command.
_LAUNCHER = """
import ctypes, os, signal, sys
try:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
except OSError:
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit(137)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as e:
    sys.stderr.write(f"cannot start {sys.argv[2]}: {e}\\n")
    sys.exit(127)
"""


def _launch_argv(argv: list[str]) -> list[str]:
    """argv wrapped so the command dies with this process (Linux); unchanged elsewhere."""
    if not sys.platform.startswith("linux"):
        return argv
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(os.getpid()), *argv]


def _call(
    argv: list[str],
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    log: Path,
    stdout: Path | None = None,
) -> tuple[int | None, str]:
    """Run argv; returns (exit code or None on timeout, a one-line reason on failure)."""
    with contextlib.ExitStack() as stack:
        err = stack.enter_context(log.open("wb"))
        out = stack.enter_context(stdout.open("wb")) if stdout else err
        err.write(("$ " + shlex.join(argv) + "\n").encode())
        err.flush()
        try:
            proc = subprocess.Popen(
                _launch_argv(argv),
                cwd=cwd,
                env=dict(env),
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as e:
            return 127, f"cannot start {argv[0]}: {e}"
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None, f"killed after {timeout:.0f}s ({argv[0]})"
        finally:
            if proc.poll() is None:  # interrupted (KeyboardInterrupt): do not leak it
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
    if rc != 0:
        return rc, f"exit {rc}: {_last_line(log)}"
    return rc, ""


def _last_line(log: Path) -> str:
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1].strip()[:300] if lines else "(no output)"


def parse_json_output(text: str) -> dict[str, Any]:
    """The evaluate command's JSON: the whole stdout, else its last line that is a JSON object."""
    text = text.strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
        for line in reversed(text.splitlines()):
            try:
                data = json.loads(line)
                break
            except json.JSONDecodeError:
                continue
    if not isinstance(data, dict):
        raise ValueError("evaluation printed no JSON object on stdout")
    return data


def lookup_metric(metrics: Mapping[str, Any], name: str) -> Any:
    """`name` at top level, else as a dotted path, else the unique nested key of that name."""
    if name in metrics:
        return metrics[name]
    node: Any = metrics
    for part in name.split("."):
        if not isinstance(node, Mapping) or part not in node:
            break
        node = node[part]
    else:
        return node
    found = list(_find(metrics, name))
    if len(found) == 1:
        return found[0]
    if not found:
        raise KeyError(f"metric {name!r} not in evaluation output (keys: {sorted(metrics)})")
    raise KeyError(f"metric {name!r} is ambiguous in evaluation output; use a dotted path")


def _find(node: Any, name: str) -> Any:
    if isinstance(node, Mapping):
        for k, v in node.items():
            if k == name:
                yield v
            else:
                yield from _find(v, name)
