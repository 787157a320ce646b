"""Progress that reaches the user wherever the output goes: a bar on a terminal, lines elsewhere.

`Progress(total, stage="sft")` shows a tqdm bar when its stream is a TTY. When it is not
(CI, `nohup`, a notebook, `quickstart > log`), it writes a heartbeat line instead, at
least every `interval` seconds while steps arrive:

    [sft] step 370/800 (46%) | 9.8 step/s | elapsed 0:38 | ETA 0:44 | loss=0.412

A long call that makes no steps (a compile, the reference log-prob precompute, an
evaluation) runs inside `progress.waiting("compiling the train step")` or the
free-standing `heartbeat(stage, what)`, which writes `still running` lines from a timer
thread while the call lasts.

Design choices:
- Step-driven output: `update(step)` writes a line when `interval` has passed since the
  last line. That alone is not enough: JAX dispatches steps asynchronously and a loop
  blocks only where it reads results back (every `log_every` steps), so `update` calls
  can be minutes apart under load (measured: 20 steps synchronised at once took 170 s
  at load average 30). So off a TTY a watchdog thread (`_Beat`) writes the same status
  line whenever `interval` seconds pass without one; it sleeps on an Event in between,
  so it costs nothing per step. `watchdog=False` gives the purely thread-free variant.
- `waiting(what)` (around a compile, an evaluation, a reference precompute) makes the
  watchdog say what the run waits for; the free-standing `heartbeat()` runs its own
  timer thread for code outside a `Progress`. Both share the last-line time
  (`_Emitter.line_if_quiet`, under a lock), so lines never double up.
- The default interval is 20 s; with the watchdog, gaps stay within it plus a wake-up.
- Clock, stream, TTY detection and the timer's wait are injectable, so tests check the
  output exactly without sleeping or asserting on wall-clock time.
- Lines are flushed at once; a bar's neighbours are written with `tqdm.write`, so a
  heartbeat never tears the bar.
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TextIO

from tqdm import tqdm

HEARTBEAT_S = 20.0

Clock = Callable[[], float]


def fmt_duration(seconds: float) -> str:
    """`0:07`, `12:34`, `1:02:03`; `?` for a non-finite value."""
    if not math.isfinite(seconds):
        return "?"
    s = int(max(0.0, seconds))
    h, m, sec = s // 3600, s // 60 % 60, s % 60
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def _fmt_postfix(postfix: Mapping[str, Any]) -> str:
    return " ".join(
        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in postfix.items()
    )


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or file-like without isatty
        return False


class _Emitter:
    """Writes whole lines to a stream (around a live bar if there is one); remembers when."""

    def __init__(self, stream: TextIO, clock: Clock) -> None:
        self.stream, self.clock = stream, clock
        self.last = clock()
        self.bar: Any = None  # a live tqdm bar, written around with tqdm.write
        self.lock = threading.Lock()

    def line(self, text: str) -> None:
        with self.lock:
            self._write(text)

    def line_if_quiet(self, render: Callable[[], str], interval: float) -> bool:
        """Write `render()` if nothing was written for `interval` s (atomic across threads)."""
        with self.lock:
            if self.clock() - self.last < interval:
                return False
            self._write(render())
            return True

    def _write(self, text: str) -> None:
        if self.bar is not None:
            tqdm.write(text, file=self.stream)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()
        self.last = self.clock()


class _Beat:
    """The timer thread: a `still running` line (or `render()`) once `interval` s are quiet."""

    def __init__(
        self,
        emitter: _Emitter,
        stage: str,
        what: str,
        interval: float,
        detail: Callable[[], str] | None,
        render: Callable[[], str] | None = None,
    ) -> None:
        self.emitter, self.stage, self.what = emitter, stage, what
        self.interval, self.detail, self.render = interval, detail, render
        self.t0 = emitter.clock()
        self.beats = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run(self, wait: Callable[[float], bool]) -> None:
        """Loop until `wait` returns True (stopped); public so tests drive it synchronously."""
        while True:
            due = self.emitter.last + self.interval - self.emitter.clock()
            if wait(max(0.0, due)):
                return
            if self.emitter.line_if_quiet(self.render or self._still_running, self.interval):
                self.beats += 1

    def _still_running(self) -> str:
        extra = f" | {self.detail()}" if self.detail else ""
        elapsed = fmt_duration(self.emitter.clock() - self.t0)
        return f"[{self.stage}] {self.what}: still running, {elapsed} elapsed{extra}"

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self.run, args=(self._stop.wait,), name=f"heartbeat-{self.stage}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


@contextlib.contextmanager
def heartbeat(
    stage: str,
    what: str,
    *,
    stream: TextIO | None = None,
    interval: float = HEARTBEAT_S,
    clock: Clock = time.monotonic,
    enabled: bool = True,
    announce: bool = False,
    _emitter: _Emitter | None = None,
    _detail: Callable[[], str] | None = None,
) -> Iterator[None]:
    """Write `[stage] what: still running, M:SS elapsed` every `interval` s while the body runs.

    With `announce`, also a `[stage] what ...` line first and `[stage] what: done in M:SS`
    last; without it, a body shorter than `interval` writes nothing.
    """
    if not enabled:
        yield
        return
    emitter = _emitter or _Emitter(stream or sys.stderr, clock)
    if announce:
        emitter.line(f"[{stage}] {what} ...")
    beat = _Beat(emitter, stage, what, interval, _detail)
    beat.start()
    try:
        yield
    finally:
        beat.stop()
    if announce or beat.beats:
        emitter.line(f"[{stage}] {what}: done in {fmt_duration(emitter.clock() - beat.t0)}")


class Progress:
    """Step progress: a tqdm bar on a TTY, heartbeat lines otherwise (see module docstring).

    `update(step)` takes the absolute step (resumed runs start at `start`); `close()`
    writes a final summary line when not on a TTY. Usable as a context manager.
    """

    def __init__(
        self,
        total: int,
        *,
        stage: str = "train",
        start: int = 0,
        unit: str = "step",
        stream: TextIO | None = None,
        tty: bool | None = None,
        enabled: bool = True,
        interval: float = HEARTBEAT_S,
        clock: Clock = time.monotonic,
        watchdog: bool = True,
    ) -> None:
        self.stream = stream or sys.stderr
        self.total, self.start, self.stage, self.unit = total, start, stage, unit
        self.enabled = enabled
        self.tty = _isatty(self.stream) if tty is None else tty
        self.interval, self.clock = interval, clock
        self.step = start
        self.postfix: dict[str, Any] = {}
        self._emitter = _Emitter(self.stream, clock)
        self.t0 = clock()
        self._mark = (self.t0, start)  # (time, step) of the last line: the rate's window
        self._closed = False
        self._bar: Any = None
        self._beat: _Beat | None = None
        self._waiting: tuple[str, float] | None = None
        if not enabled:
            return
        if self.tty:
            self._bar = tqdm(
                total=total,
                initial=start,
                desc=stage,
                unit=unit,
                file=self.stream,
                dynamic_ncols=True,
                leave=True,
            )
            self._emitter.bar = self._bar
        else:
            resumed = f", resuming at {start}" if start else ""
            self._emitter.line(f"[{stage}] {total} {unit}s{resumed}")
            if watchdog:
                self._beat = _Beat(self._emitter, stage, "", interval, None, self._beat_line)
                self._beat.start()

    # -- lines --------------------------------------------------------------------------------

    def status(self) -> str:
        """`step 370/800 (46%) | 9.8 step/s | elapsed 0:38 | ETA 0:44 | loss=0.412`."""
        now = self.clock()
        t_mark, s_mark = self._mark
        window = now - t_mark
        done = self.step - s_mark
        if done <= 0 or window <= 0:  # no step since the last line: the whole run's average
            window, done = now - self.t0, self.step - self.start
        rate = done / window if window > 0 and done > 0 else 0.0
        eta = (self.total - self.step) / rate if rate > 0 else math.nan
        frac = self.step / max(1, self.total)
        parts = [
            f"{self.unit} {self.step}/{self.total} ({frac:.0%})",
            f"{rate:.3g} {self.unit}/s" if rate else f"? {self.unit}/s",
            f"elapsed {fmt_duration(now - self.t0)}",
            f"ETA {fmt_duration(eta)}",
        ]
        if self.postfix:
            parts.append(_fmt_postfix(self.postfix))
        return " | ".join(parts)

    def update(self, step: int, postfix: Mapping[str, Any] | None = None) -> None:
        """Record that `step` steps are done (absolute, not an increment)."""
        if postfix:
            self.postfix = dict(postfix)
        if not self.enabled:
            self.step = step
            return
        if self._bar is not None:
            if postfix:
                self._bar.set_postfix_str(_fmt_postfix(self.postfix), refresh=False)
            self._bar.update(step - self.step)
            self.step = step
            return
        self.step = step
        now = self.clock()
        if now - self._emitter.last >= self.interval:
            self._emitter.line(f"[{self.stage}] {self.status()}")
            self._mark = (now, step)

    def note(self, text: str) -> None:
        """A line of its own (above the bar on a TTY)."""
        if self.enabled:
            self._emitter.line(f"[{self.stage}] {text}")

    def waiting(self, what: str) -> contextlib.AbstractContextManager[None]:
        """Heartbeat lines while a long call that makes no steps runs (compile, precompute).

        On a TTY the bar's label says what it waits for instead.
        """
        if self._bar is not None:
            return self._labelled(what)
        if self._beat is not None:
            return self._waiting_for(what)
        return heartbeat(
            self.stage,
            what,
            interval=self.interval,
            enabled=self.enabled and not self.tty,
            _emitter=self._emitter,
            _detail=lambda: f"{self.unit} {self.step}/{self.total}",
        )

    def _beat_line(self) -> str:
        """What the watchdog writes: the status, or what a long call is waiting for."""
        if self._waiting is None:
            return f"[{self.stage}] {self.status()}"
        what, t0 = self._waiting
        elapsed = fmt_duration(self.clock() - t0)
        return (
            f"[{self.stage}] {what}: still running, {elapsed} elapsed | "
            f"{self.unit} {self.step}/{self.total}"
        )

    @contextlib.contextmanager
    def _waiting_for(self, what: str) -> Iterator[None]:
        t0 = self.clock()
        self._waiting = (what, t0)
        try:
            yield
        finally:
            self._waiting = None
        if self.clock() - t0 >= self.interval:
            self.note(f"{what}: done in {fmt_duration(self.clock() - t0)}")

    @contextlib.contextmanager
    def _labelled(self, what: str) -> Iterator[None]:
        self._bar.set_description_str(f"{self.stage} ({what})", refresh=True)
        try:
            yield
        finally:
            self._bar.set_description_str(self.stage, refresh=False)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._beat is not None:
            self._beat.stop()
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
            self._emitter.bar = None
            return
        elapsed = self.clock() - self.t0
        done = self.step - self.start
        rate = f", {done / elapsed:.3g} {self.unit}/s" if elapsed > 0 and done > 0 else ""
        tail = f" | {_fmt_postfix(self.postfix)}" if self.postfix else ""
        self._emitter.line(
            f"[{self.stage}] done: {self.unit} {self.step}/{self.total} in "
            f"{fmt_duration(elapsed)}{rate}{tail}"
        )

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
