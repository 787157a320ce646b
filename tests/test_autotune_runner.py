"""The trial runner against the shipped objective script: every status, hard timeouts,
and a checkpoint that survives an evaluation crash."""

from __future__ import annotations

import json
import os

import pytest
from autotune_helpers import write_space

from studio_align.autotune.runner import TRAINED, Runner, lookup_metric, parse_json_output
from studio_align.autotune.space import Space


@pytest.fixture
def runner(tmp_path):
    def make(**sections):
        space = Space.load(write_space(tmp_path, **sections))
        return Runner(space, tmp_path / "out"), space

    return make


def test_ok_reads_metric_and_passes_overrides(runner):
    r, space = runner()
    res = r.run(1, 4, space.complete({"x": 0.6}))
    assert res.status == "ok", res.message
    assert res.metrics["split"] == "validation"
    ckpt = json.loads((r.out / "trials/0001/seed-4/checkpoint.json").read_text())
    assert ckpt["x"] == 0.6 and ckpt["seed"] == 4 and ckpt["noise"] == 0.02  # locked key too


def test_crash_in_training(runner):
    r, space = runner(locked={"mode": "crash"})
    res = r.run(1, 0, space.baseline())
    assert (res.status, res.phase) == ("crash", "train")
    assert "loss exploded" in res.message  # the trainer's last stderr line


def test_nan_metric(runner):
    r, space = runner(locked={"mode": "nan"})
    res = r.run(1, 0, space.baseline())
    assert res.status == "nan" and res.value is None


def test_timeout_kills_the_hung_trainer(runner):
    budget = {"trials": 1, "wall_clock_s": 60, "trial_timeout_s": 1.5}
    r, space = runner(locked={"mode": "hang"}, budget=budget)
    res = r.run(1, 0, space.baseline())
    assert res.status == "timeout" and res.phase == "train"
    pid = int((r.out / "trials/0001/seed-0/hang.pid").read_text())
    with pytest.raises(ProcessLookupError):  # killed and reaped, not waited out (it sleeps an hour)
        os.kill(pid, 0)


def test_missing_metric_is_a_crash(runner):
    r, space = runner(metric={"name": "accuracy", "direction": "maximize"})
    res = r.run(1, 0, space.baseline())
    assert res.status == "crash" and "accuracy" in res.message and "score" in res.message


def test_eval_crash_keeps_the_trained_checkpoint(runner, tmp_path):
    r, space = runner()
    (tmp_path / "validation.json").write_text(json.dumps({"split": "validation", "crash": True}))
    first = r.run(2, 0, space.baseline())
    assert (first.status, first.phase) == ("crash", "eval")
    rdir = r.out / "trials/0002/seed-0"
    assert (rdir / TRAINED).exists() and (rdir / "checkpoint.json").exists()
    (tmp_path / "validation.json").write_text(json.dumps({"split": "validation"}))
    again = r.run(2, 0, space.baseline())
    assert again.status == "ok"
    assert (rdir / "train_count").read_text().count("1") == 1  # trained exactly once


def test_half_written_run_is_retrained(runner):
    r, space = runner()
    rdir = r.out / "trials/0003/seed-0"
    rdir.mkdir(parents=True)
    (rdir / "stale").write_text("left by a killed trainer")
    assert r.run(3, 0, space.baseline()).status == "ok"
    assert not (rdir / "stale").exists()


def test_json_output_and_metric_lookup():
    assert parse_json_output('loading...\n{"a": 1}\n') == {"a": 1}
    with pytest.raises(ValueError, match="no JSON"):
        parse_json_output("done\n")
    m = {"overall": {"exact_plan_accuracy": 0.5}, "n": 3}
    assert lookup_metric(m, "overall.exact_plan_accuracy") == 0.5
    assert lookup_metric(m, "exact_plan_accuracy") == 0.5
    with pytest.raises(KeyError, match="ambiguous"):
        lookup_metric({"a": {"f1": 1}, "b": {"f1": 2}}, "f1")
