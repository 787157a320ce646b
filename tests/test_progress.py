"""Progress output: heartbeat lines off a TTY, a tqdm bar on one, timer beats during waits.

Every test injects the clock and the stream, so nothing here sleeps for the interval or
asserts on wall-clock time.
"""

from __future__ import annotations

import io
import re
import threading

import pytest

from studio_align.training.progress import (
    Progress,
    _Beat,
    _Emitter,
    fmt_duration,
    heartbeat,
)


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_fmt_duration():
    assert [fmt_duration(x) for x in (0, 7.9, 754, 3723)] == ["0:00", "0:07", "12:34", "1:02:03"]
    assert fmt_duration(float("nan")) == "?"


def test_lines_off_a_tty_come_at_the_interval_with_rate_and_eta():
    clock, out = FakeClock(), io.StringIO()
    p = Progress(100, stage="sft", stream=out, interval=20, clock=clock, watchdog=False)
    assert out.getvalue() == "[sft] 100 steps\n"
    for step in range(1, 101):
        clock.t += 0.5  # 2 steps/s
        p.update(step, {"loss": 1.0 / step} if step % 10 == 0 else None)
    p.close()
    lines = out.getvalue().splitlines()
    beats = [ln for ln in lines if "ETA" in ln]
    # a line every 20 s of fake time: steps 40 and 80 over 50 s
    assert [re.search(r"step (\d+)/100", ln)[1] for ln in beats] == ["40", "80"]
    assert beats[0] == "[sft] step 40/100 (40%) | 2 step/s | elapsed 0:20 | ETA 0:30 | loss=0.025"
    assert lines[-1] == "[sft] done: step 100/100 in 0:50, 2 step/s | loss=0.01"


def test_rate_is_the_window_since_the_last_line_not_the_compile():
    clock, out = FakeClock(), io.StringIO()
    p = Progress(1000, stage="dpo", stream=out, interval=20, clock=clock, watchdog=False)
    clock.t += 25  # the first step compiles for 25 s
    p.update(1)
    for step in range(2, 42):
        clock.t += 0.5
        p.update(step)
    lines = out.getvalue().splitlines()
    assert lines[1].startswith("[dpo] step 1/1000 (0%) | 0.04 step/s")
    assert lines[2].startswith("[dpo] step 41/1000 (4%) | 2 step/s")  # 40 steps in 20 s
    assert "ETA 7:59" in lines[2]  # 959 steps at 2 step/s


def test_resumed_run_says_so_and_counts_from_start():
    clock, out = FakeClock(), io.StringIO()
    p = Progress(10, stage="sft", start=6, stream=out, interval=1, clock=clock, watchdog=False)
    clock.t += 2
    p.update(8)
    assert out.getvalue().splitlines()[0] == "[sft] 10 steps, resuming at 6"
    assert "step 8/10 (80%) | 1 step/s" in out.getvalue()


def test_disabled_writes_nothing():
    out = io.StringIO()
    p = Progress(10, stream=out, enabled=False)
    p.update(5)
    with p.waiting("compiling"):
        pass
    p.close()
    assert out.getvalue() == ""


def test_tty_gets_a_tqdm_bar_and_no_heartbeat_lines():
    out = FakeTTY()
    p = Progress(10, stage="sft", stream=out)
    with p.waiting("compiling the train step"):
        pass
    p.update(5, {"loss": 1.5})
    p.update(10)
    p.close()
    text = out.getvalue()
    assert "\r" in text and "10/10" in text and "loss=1.5" in text
    assert "sft (compiling the train step)" in text
    assert "[sft]" not in text  # bar only, no heartbeat lines


def test_the_timer_beats_while_a_call_runs():
    """Drive the beat loop synchronously: its `wait` advances the fake clock."""
    clock, out = FakeClock(), io.StringIO()
    em = _Emitter(out, clock)
    beat = _Beat(em, "sft", "compiling the train step", 20, lambda: "step 0/800")
    waits: list[float] = []

    def wait(timeout: float) -> bool:  # returns True (= stopped) on the fourth call
        waits.append(timeout)
        clock.t += timeout
        return len(waits) == 4

    beat.run(wait)
    assert waits == [20, 20, 20, 20]
    assert out.getvalue().splitlines() == [
        f"[sft] compiling the train step: still running, {s} elapsed | step 0/800"
        for s in ("0:20", "0:40", "1:00")
    ]


def test_a_step_line_delays_the_next_beat():
    clock, out = FakeClock(), io.StringIO()
    em = _Emitter(out, clock)
    beat = _Beat(em, "grpo", "rollout", 20, None)
    clock.t += 15
    em.line("a step line")  # written 15 s in: the next beat is due 20 s after it
    waits: list[float] = []

    def wait(timeout: float) -> bool:
        waits.append(timeout)
        clock.t += timeout
        return True

    beat.run(wait)
    assert waits == [20]


def test_heartbeat_thread_really_writes_and_stops():
    """The real thread, with a tiny interval; the body waits for two beats (bounded)."""
    out = io.StringIO()
    got_two = threading.Event()

    class Watch(io.StringIO):
        def write(self, s: str) -> int:
            n = out.write(s)
            if out.getvalue().count("still running") >= 2:
                got_two.set()
            return n

    with heartbeat("kto", "reference log-probs", stream=Watch(), interval=0.01, announce=True):
        assert got_two.wait(timeout=60)
    lines = out.getvalue().splitlines()
    assert lines[0] == "[kto] reference log-probs ..."
    assert lines[1].startswith("[kto] reference log-probs: still running,")
    assert lines[-1].startswith("[kto] reference log-probs: done in ")
    n = len(lines)
    assert len(out.getvalue().splitlines()) == n  # nothing after the block ended


def test_short_call_without_announce_is_silent():
    out = io.StringIO()
    with heartbeat("sft", "evaluating", stream=out, interval=3600):
        pass
    assert out.getvalue() == ""


def test_heartbeat_propagates_the_body_error():
    with (
        pytest.raises(ValueError, match="boom"),
        heartbeat("sft", "x", stream=io.StringIO(), interval=3600),
    ):
        raise ValueError("boom")


def test_watchdog_fills_the_gap_of_a_blocking_sync():
    """Steps dispatched fast, then the loop blocks reading results back: the watchdog
    writes the status meanwhile, and says what a `waiting` block waits for."""
    clock, out = FakeClock(), io.StringIO()
    p = Progress(200, stage="sft", stream=out, interval=20, clock=clock, watchdog=False)
    beat = _Beat(p._emitter, "sft", "", 20, None, p._beat_line)  # the watchdog, driven here
    ticks = iter([False, False, True])

    def wait(timeout: float) -> bool:
        clock.t += timeout
        return next(ticks)

    for step in range(1, 21):
        p.update(step)  # dispatched in no time
    beat.run(wait)  # ...then 40 s blocked: two watchdog lines
    lines = out.getvalue().splitlines()
    assert lines[1:] == [
        "[sft] step 20/200 (10%) | 1 step/s | elapsed 0:20 | ETA 3:00",
        "[sft] step 20/200 (10%) | 0.5 step/s | elapsed 0:40 | ETA 6:00",
    ]
    with p._waiting_for("evaluating"):  # what waiting() uses when the watchdog runs
        clock.t += 21
        assert p._emitter.line_if_quiet(p._beat_line, 20)
    assert out.getvalue().splitlines()[-2:] == [
        "[sft] evaluating: still running, 0:21 elapsed | step 20/200",
        "[sft] evaluating: done in 0:21",
    ]


def test_watchdog_thread_starts_and_stops_with_the_progress():
    out = io.StringIO()
    p = Progress(5, stage="x", stream=out, interval=3600)
    assert p._beat is not None and p._beat._thread is not None and p._beat._thread.is_alive()
    p.close()
    assert not p._beat._thread.is_alive()
