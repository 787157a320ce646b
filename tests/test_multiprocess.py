"""Two JAX processes on localhost, 4 CPU devices each (gloo collectives), as one 8-device
mesh, against one process with 8 devices: the same losses and final parameters.

Tolerance: `rtol=1e-5, atol=1e-6` on losses and metrics, `rtol=1e-4, atol=1e-5` on
parameters. The
two runs compute the same float32 programme except for where partial sums meet: one
process reduces the 8 devices' gradients inside XLA, two processes reduce 4 on each side
and then across the pair through gloo, so the additions happen in another order and
round differently (about 1e-7 relative per reduction). Adam divides by the root of the
second moment, which carries such differences into the weights, and more where a
moment is near zero (the reward head, unclipped at a high rate, ends 1e-5 apart on
weights of order one); a real bug (a row fed
twice, a shard missing, a process on stale weights) moves losses at the first step by
1e-2 or more.

Every test runs the real entry point (the test worker's `train_loop`, or the
`studio-align train ...` command) in fresh processes (`multiprocess.launch`), each
process with its own `run_dir` and one shared checkpoint directory, so the tests also see
what each process writes.

The default suite keeps one pair (the `train_loop` worker: equivalence, rows counted per
process, only process 0 writing, ~30 s on two busy cores); every trainer's command, the
kill and the fresh-pair resume are in the slow set.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import cpu8_env, make_route_workspace
from multiprocess import Proc, launch

WORKER = Path(__file__).with_name("_training_worker.py")
KILL_PLUGIN = Path(__file__).with_name("plugins") / "kill_at_step.py"
CLI = "from studio_align.cli import main; main()"
LOSS_TOL = {"rtol": 1e-5, "atol": 1e-6}
PARAM_TOL = {"rtol": 1e-4, "atol": 1e-5}


def _ok(procs: list[Proc]) -> None:
    for i, p in enumerate(procs):
        assert p.returncode == 0, f"process {i} failed ({p.returncode}):\n{p.stderr[-3000:]}"


def _single(argv: list[str], timeout: float = 600) -> None:
    """`argv` as one process with 8 devices."""
    proc = subprocess.run(argv, env=cpu8_env(8), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _sets(**kv: Any) -> list[str]:
    return [a for k, v in kv.items() for a in ("--set", f"{k}={v}")]


def _worker(tmp: Path, name: str, *sets: str) -> list[str]:
    return [sys.executable, str(WORKER), str(tmp / name), str(tmp / f"{name}.npz"), *sets]


def _params(d: Any) -> dict[str, np.ndarray]:
    return {k: d[k] for k in d.files if k.startswith("p/")}


def _max_diff(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    assert a.keys() == b.keys()
    return max(float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k])))) for k in a)


# -- the train loop ------------------------------------------------------------------------------

# one epoch of the worker's 256 examples, 16 a step; weights split over all 8 devices, so
# over both processes: what process 0 saves has to be gathered from its peer
STEPS = ["--set", "train.steps=16", "--set", "mesh.data=1", "--set", "mesh.fsdp=8"]


def _pair_worker(tmp: Path, *sets: str, **kw: Any) -> list[Proc]:
    """The worker as two processes: run dirs `tmp/run0`, `tmp/run1`, checkpoints shared."""
    return launch(
        _worker(tmp, "pair", *STEPS, *_sets(**{"checkpoint.dir": tmp / "ckpt"}), *sets),
        tmp / "logs",
        own=lambda i: _sets(run_dir=tmp / f"run{i}"),
        **kw,
    )


def test_two_processes_train_like_one_and_feed_every_record_once(tmp_path: Path) -> None:
    _single(_worker(tmp_path, "one", *STEPS))
    _ok(_pair_worker(tmp_path))
    one = np.load(tmp_path / "one.npz")
    p0, p1 = (np.load(tmp_path / f"pair.{i}.npz") for i in range(2))
    assert int(p0["devices"]) == int(p1["devices"]) == int(one["devices"]) == 8
    assert int(p0["compiles"]) == 1
    assert str(p0["s/l2/kernel"]) == "P('fsdp', None)"
    np.testing.assert_allclose(p0["losses"], one["losses"], **LOSS_TOL)
    for k, v in _params(one).items():  # both processes end with the same whole model
        np.testing.assert_allclose(p0[k], v, **PARAM_TOL, err_msg=k)
        np.testing.assert_array_equal(p1[k], p0[k], err_msg=k)
    # each process fed 8 of each step's 16 rows; over the epoch every record exactly once
    assert p0["rows"].shape == p1["rows"].shape == (16, 8)
    for s in range(16):
        assert not set(p0["rows"][s]) & set(p1["rows"][s]), f"step {s}: a row on both"
    fed = np.concatenate([p0["rows"].ravel(), p1["rows"].ravel()])
    np.testing.assert_array_equal(np.sort(fed), np.arange(256))
    # only process 0 writes metrics; checkpoints are written by both into one directory
    assert len((tmp_path / "run0" / "metrics.jsonl").read_text().splitlines()) == 16
    assert not (tmp_path / "run1").exists() or not any((tmp_path / "run1").iterdir())
    assert {p.name for p in (tmp_path / "ckpt").iterdir() if p.name.isdigit()} == {"12", "16"}


@pytest.mark.slow  # three pairs of processes and a 10 s wait: over a minute
def test_killed_process_stops_its_peer_in_one_line_and_a_fresh_pair_resumes_exactly(
    tmp_path: Path,
) -> None:
    whole = tmp_path / "whole"
    _ok(_pair_worker(whole))
    cut = tmp_path / "cut"
    kill = {"STUDIO_ALIGN_PLUGINS": str(KILL_PLUGIN), "KILL_AT_STEP": "8"}
    killed = _pair_worker(cut, env={1: kill}, heartbeat_timeout=10, timeout=300)
    assert killed[1].returncode == -9  # process 1 died right after checkpoint 8
    survivor = killed[0]
    assert survivor.returncode == 2, survivor.stderr[-3000:]  # it stopped, not the test
    lines = [ln for ln in survivor.stderr.splitlines() if ln.strip()]
    assert lines[-1].startswith("Error: distributed: process 0 stops: process 1 stopped")
    assert "10 s" in lines[-1] and "resume" in lines[-1]
    assert "Traceback" not in survivor.stderr and "Check failure" not in survivor.stderr
    assert not (cut / "pair.0.npz").exists()
    _ok(_pair_worker(cut))  # a fresh pair, the same command: resumes from step 8
    a, b = np.load(whole / "pair.0.npz"), np.load(cut / "pair.0.npz")
    assert list(b["steps"]) == list(range(9, 17))
    np.testing.assert_array_equal(b["losses"], a["losses"][8:])
    for k, v in _params(a).items():
        np.testing.assert_array_equal(b[k], v, err_msg=k)
    assert len((cut / "run0" / "metrics.jsonl").read_text().splitlines()) == 16


# -- every trainer's command -----------------------------------------------------------------------


def _metrics(run_dir: Path) -> list[dict[str, float]]:
    rows = [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines()]
    timing = ("time", "per_s", "seconds")
    return [
        {k: v for k, v in r.items() if isinstance(v, float) and not any(t in k for t in timing)}
        for r in rows
    ]


def _safetensors(path: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(path))


def _compare_cli(
    tmp: Path,
    args: list[str],
    *,
    run_dir: str = "run_dir",
    out: str | None = None,
    weights: str,
) -> dict[str, float]:
    """`studio-align ARGS` as one process (8 devices) and as a pair; compare metrics and
    the saved weights (`weights`, relative to the output directory); returns max diffs."""
    where = out or run_dir

    def own(name: str, ckpt: str) -> list[str]:
        sets = {run_dir: tmp / name, "checkpoint.dir": tmp / ckpt}
        if out is not None:
            sets[out] = tmp / f"{name}-out"
        return _sets(**sets)

    base = [sys.executable, "-c", CLI, *args]
    _single([*base, *own("one", "one-ckpt")])
    _ok(launch(base, tmp / "logs", own=lambda i: own(f"p{i}", "pair-ckpt")))
    one_dir = tmp / ("one-out" if out else "one")
    p0_dir, p1_dir = (tmp / (f"p{i}-out" if out else f"p{i}") for i in range(2))
    m1, m2 = _metrics(tmp / "one"), _metrics(tmp / "p0")
    assert len(m1) == len(m2) > 0 and [r.keys() for r in m1] == [r.keys() for r in m2]
    diffs = {"metrics": 0.0}
    for r1, r2 in zip(m1, m2, strict=True):
        for k in r1:
            np.testing.assert_allclose(r2[k], r1[k], **LOSS_TOL, err_msg=k)
            diffs["metrics"] = max(diffs["metrics"], abs(r2[k] - r1[k]))
    load = _safetensors if weights.endswith(".safetensors") else lambda p: dict(np.load(p))
    w1, w2 = load(one_dir / weights), load(p0_dir / weights)
    diffs["params"] = _max_diff(w1, w2)
    for k in w1:
        np.testing.assert_allclose(w2[k], w1[k], **PARAM_TOL, err_msg=k)
    # process 1 trained too, but wrote no metrics, model or report of its own
    assert not (tmp / "p1" / "metrics.jsonl").exists()
    assert not (p1_dir / weights).exists()
    print(f"{' '.join(args[:2])}: max |two processes - one| {diffs} ({where})")
    return diffs


@pytest.fixture(scope="module")
def route_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_route_workspace(tmp_path_factory.mktemp("mp-route"))


def _route(ws: Path, **kv: Any) -> list[str]:
    return _sets(**{"model.init_from": ws / "router", "data.dir": ws / "compiled", **kv})


@pytest.mark.slow
def test_sft_two_processes_match_one(tmp_path: Path) -> None:
    from studio_align.router.data import write_jsonl
    from studio_align.simulate.router.requests import generate_examples

    train = write_jsonl(tmp_path / "train.jsonl", generate_examples(96, seed=0))
    held = write_jsonl(tmp_path / "held.jsonl", generate_examples(32, seed=1, split="heldout"))
    sets = {"model.preset": "tiny", "model.vocab_size": 300, "data.train": train,
            "data.heldout": held, "train.steps": 6, "train.batch_size": 16,
            "train.log_every": 1, "train.progress": "false", "checkpoint.every": 3}  # fmt: skip
    _compare_cli(tmp_path, ["train", "sft", *_sets(**sets)], weights="model/params.safetensors")


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["dpo", "kto"])
def test_preference_trainers_two_processes_match_one(
    tmp_path: Path, route_ws: Path, algo: str
) -> None:
    sets = _route(route_ws, **{"train.steps": 4, "train.batch_size": 8, "train.log_every": 1,
                               "train.progress": "false", "optim.learning_rate": 3e-3})  # fmt: skip
    _compare_cli(tmp_path, ["train", algo, *sets], weights="model/params.safetensors")


@pytest.mark.slow
def test_grpo_two_processes_match_one(tmp_path: Path, route_ws: Path) -> None:
    sets = _route(route_ws, **{"train.steps": 3, "grpo.prompts_per_step": 4,
                               "grpo.group_size": 4, "grpo.beta": 0.04,
                               "optim.learning_rate": 3e-3})  # fmt: skip
    _compare_cli(tmp_path, ["train", "grpo", *sets], weights="model/params.safetensors")


@pytest.mark.slow
def test_reward_model_two_processes_match_one(tmp_path: Path) -> None:
    from studio_align.simulate.grading.creator import (
        WARM_TASTE,
        SimulatedCreator,
        write_creator_logs,
    )

    log = write_creator_logs(
        tmp_path / "logs", [(SimulatedCreator("warm", WARM_TASTE, 1.0), 40, 0)], seed=2,
        size=(20, 20),
    )  # fmt: skip
    sets = {"logs": json.dumps([str(log)]), "heldout_fraction": 0.4,
            "encoder.name": "color-stats", "encoder.options": "{size = 20}",
            "train.steps": 12, "gate.min_heldout_accuracy": 0.0,
            "progress": "false"}  # fmt: skip
    _compare_cli(tmp_path, ["train", "reward", *_sets(**sets)], out="out", weights="weights.npz")


@pytest.mark.slow
def test_flow_pretraining_two_processes_match_one(tmp_path: Path) -> None:
    sets = {"model.arch": "dit", "model.image_size": 8, "model.patch": 4, "model.width": 32, "model.depth": 1,
            "model.heads": 2, "data.procedural": 32, "train.steps": 4, "train.batch_size": 8,
            "train.log_every": 1, "train.progress": "false", "checkpoint.every": 2}  # fmt: skip
    _compare_cli(
        tmp_path, ["train", "flow", *_sets(**sets)], out="out", weights="model.safetensors"
    )
