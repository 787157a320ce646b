"""Train loop parts: optimizers and schedules, exact accumulation, one compile, metrics."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

sys.path.insert(0, str(Path(__file__).parent))
from _training_worker import MLP, data, mse

from studio_align.config import load_config, validate
from studio_align.errors import ConfigError
from studio_align.training.accumulate import accumulated_grads
from studio_align.training.batches import ArrayBatches
from studio_align.training.loop import TrainRunConfig, train_loop
from studio_align.training.optim import OptimConfig, make_optimizer, make_schedule
from studio_align.training.supervised import supervised


def _weighted_loss(model: MLP, batch: dict) -> tuple[jax.Array, dict]:
    """A mean over a *varying* number of masked units per micro-batch (like SFT tokens)."""
    err = (model(batch["x"]) - batch["y"]) ** 2
    n = batch["mask"].sum()
    return (err * batch["mask"]).sum() / n, {"weight": n}


@pytest.mark.parametrize("loss_fn", [mse, _weighted_loss], ids=["mean", "weighted"])
def test_accumulated_gradient_equals_big_batch(loss_fn) -> None:
    model = MLP(16, 32, rngs=nnx.Rngs(0))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    d = data(n=8)
    d["mask"] = np.array([1, 1, 1, 0, 1, 0, 0, 0], np.float32)  # 3, 1, 0+1... uneven per micro
    d["mask"][6] = 1
    big = {k: jnp.asarray(v)[None] for k, v in d.items()}  # [1, 8, ...]
    small = {k: jnp.asarray(v).reshape(4, 2, *v.shape[1:]) for k, v in d.items()}  # [4, 2, ...]
    m1, g1, _ = accumulated_grads(loss_fn, nnx.Param, graphdef, params, rest, big)
    m4, g4, _ = accumulated_grads(loss_fn, nnx.Param, graphdef, params, rest, small)
    np.testing.assert_allclose(m4["loss"], m1["loss"], rtol=1e-6)
    for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g4), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    if loss_fn is _weighted_loss:  # the naive mean of micro-batch gradients would differ
        naive = jax.tree.map(
            lambda *gs: sum(gs) / 4,
            *[
                accumulated_grads(
                    loss_fn,
                    nnx.Param,
                    graphdef,
                    params,
                    rest,
                    {k: v[i : i + 1] for k, v in small.items()},
                )[1]
                for i in range(4)
            ],
        )
        diff = max(
            float(jnp.abs(a - b).max())
            for a, b in zip(jax.tree.leaves(naive), jax.tree.leaves(g1), strict=True)
        )
        assert diff > 1e-4


def _cfg(tmp_path: Path, **train) -> TrainRunConfig:
    return validate(
        TrainRunConfig,
        {
            "run_dir": str(tmp_path),
            "train": {
                "steps": 6,
                "batch_size": 8,
                "log_every": 1,
                "progress": False,
                "metrics_hook": False,
                **train,
            },
            "optim": {
                "name": "sgd",
                "learning_rate": 0.1,
                "clip_grad_norm": None,
                "decay": "constant",
            },
            "checkpoint": {"every": 0},
        },
    )


def test_train_loop_with_accumulation_matches_without(tmp_path: Path) -> None:
    finals = []
    for accum in (1, 4):
        model = MLP(16, 32, rngs=nnx.Rngs(0))
        cfg = _cfg(tmp_path / f"a{accum}", grad_accum=accum)
        res = train_loop(model, cfg, supervised(mse, ArrayBatches(data(64), 8)))
        assert res.compiles == 1  # one trace for six steps
        finals.append(nnx.state(model, nnx.Param))
    for a, b in zip(jax.tree.leaves(finals[0]), jax.tree.leaves(finals[1]), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_loop_lowers_loss_writes_metrics_and_compiles_once(tmp_path: Path) -> None:
    model = MLP(16, 32, rngs=nnx.Rngs(0))
    cfg = _cfg(tmp_path, steps=40, log_every=5)
    cfg.optim = OptimConfig(name="adamw", learning_rate=1e-2, warmup_steps=5)
    evals = []
    res = train_loop(
        model,
        cfg,
        supervised(mse, ArrayBatches(data(128), 8)),
        eval_fn=lambda m: evals.append(1) or {"mse": float(mse(m, data(32, seed=1))[0])},
    )
    assert res.compiles == 1 and res.step == 40
    recs = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train_recs = [r for r in recs if "loss" in r]
    assert [r["step"] for r in train_recs] == list(range(5, 41, 5))
    assert train_recs[-1]["loss"] < 0.5 * train_recs[0]["loss"]
    assert {"lr", "grad_norm", "steps_per_s"} <= set(train_recs[0])
    assert recs[-1]["step"] == 40 and "eval/mse" in recs[-1] and len(evals) == 1
    assert res.eval_metrics["mse"] == recs[-1]["eval/mse"]
    # the trained model is the caller's model
    assert float(mse(model, data(32, seed=1))[0]) == pytest.approx(res.eval_metrics["mse"])


def test_checkpoint_from_another_model_is_refused(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, steps=2)
    cfg.checkpoint.every = 1
    train_loop(MLP(16, 32, rngs=nnx.Rngs(0)), cfg, supervised(mse, ArrayBatches(data(64), 8)))
    cfg.train.steps = 3
    from studio_align.errors import CheckpointError

    with pytest.raises(CheckpointError, match="does not match"):
        train_loop(MLP(16, 48, rngs=nnx.Rngs(0)), cfg, supervised(mse, ArrayBatches(data(64), 8)))


def test_schedules() -> None:
    total = 100
    warm = make_schedule(
        OptimConfig(learning_rate=1.0, warmup_steps=10, decay="cosine", final_lr_ratio=0.1), total
    )
    lrs = np.array([float(warm(i)) for i in range(total + 20)])
    assert lrs[0] == 0.0 and lrs[10] == pytest.approx(1.0)
    assert np.all(np.diff(lrs[:11]) > 0) and np.all(np.diff(lrs[10:total]) <= 1e-7)
    assert lrs[total] == pytest.approx(0.1, abs=1e-6) and lrs[-1] == pytest.approx(0.1, abs=1e-6)
    lin = make_schedule(OptimConfig(learning_rate=2.0, decay="linear", final_lr_ratio=0.0), 50)
    assert float(lin(25)) == pytest.approx(1.0) and float(lin(50)) == pytest.approx(0.0)
    const = make_schedule(OptimConfig(learning_rate=0.5, decay="constant", warmup_steps=4), 50)
    assert float(const(2)) == pytest.approx(0.25) and float(const(40)) == pytest.approx(0.5)


@pytest.mark.parametrize("name", ["adamw", "adam", "sgd", "lion", "adafactor"])
def test_every_optimizer_steps(name: str, tmp_path: Path) -> None:
    model = MLP(16, 32, rngs=nnx.Rngs(0))
    before = float(mse(model, data(64))[0])
    cfg = _cfg(tmp_path, steps=8)
    cfg.optim = OptimConfig(
        name=name, learning_rate=3e-3 if name == "lion" else 1e-2, weight_decay=0.01
    )
    train_loop(model, cfg, supervised(mse, ArrayBatches(data(64), 8)))
    assert float(mse(model, data(64))[0]) < before


def test_weight_decay_skips_vectors() -> None:
    tx, _ = make_optimizer(
        OptimConfig(name="adamw", learning_rate=1.0, weight_decay=0.5, clip_grad_norm=None), 10
    )
    params = {"w": jnp.ones((2, 2)), "b": jnp.ones((2,))}
    zeros = jax.tree.map(jnp.zeros_like, params)
    updates, _ = tx.update(zeros, tx.init(params), params)
    assert float(jnp.abs(updates["b"]).max()) == 0.0 and float(updates["w"][0, 0]) == -0.5


def test_lr_scale_gives_a_group_its_own_learning_rate() -> None:
    """Adam's first step moves every weight by the learning rate; `lr_scale` multiplies it
    for the parameters under a part of that name (and decoupled decay with it), and a
    parameter in two groups gets both factors."""
    cfg = OptimConfig(name="adamw", learning_rate=0.1, weight_decay=0.5, clip_grad_norm=None,
                      decay="constant", lr_scale={"encoder": 0.1, "proj": 0.5})  # fmt: skip
    tx, _ = make_optimizer(cfg, 10)
    params = {
        "encoder": {"w": jnp.ones((2, 2)), "proj": jnp.ones((2, 2))},
        "head": jnp.ones((2, 2)),
    }
    grads = jax.tree.map(jnp.ones_like, params)
    updates, _ = tx.update(grads, tx.init(params), params)
    step = -(0.1 + 0.1 * 0.5)  # Adam's unit step plus the decay, at lr 0.1
    assert float(updates["head"][0, 0]) == pytest.approx(step, rel=1e-5)
    assert float(updates["encoder"]["w"][0, 0]) == pytest.approx(step * 0.1, rel=1e-5)
    assert float(updates["encoder"]["proj"][0, 0]) == pytest.approx(step * 0.05, rel=1e-5)
    with pytest.raises(ConfigError, match=r"optim\.lr_scale"):
        load_config(TrainRunConfig, None, ["optim.lr_scale={encoder = -1}"])


def test_config_errors_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"optim\.name"):
        load_config(TrainRunConfig, None, ["optim.name=adamx"])
    with pytest.raises(ConfigError, match="grad_accum"):
        load_config(TrainRunConfig, None, ["train.batch_size=6", "train.grad_accum=4"])
    with pytest.raises(ConfigError, match=r"train\.stepz"):
        load_config(TrainRunConfig, None, ["train.stepz=3"])
    cfg = _cfg(tmp_path, batch_size=8)
    cfg.mesh.data = 3
    with pytest.raises(ConfigError, match="data \\* fsdp"):
        train_loop(MLP(16, 32, rngs=nnx.Rngs(0)), cfg, supervised(mse, ArrayBatches(data(64), 8)))


def test_metrics_reach_plugins_and_progress_bar(tmp_path: Path) -> None:
    import io

    from studio_align.hookspecs import hookimpl
    from studio_align.plugins import PluginHost, using_host
    from studio_align.training.metrics import Progress

    seen: list[tuple[str, int, float]] = []

    class Logger:
        @hookimpl
        def studio_align_on_metrics(self, run, step, metrics):
            seen.append((run, step, metrics["loss"]))

    host = PluginHost()
    host.register(Logger(), "test-logger")
    cfg = _cfg(tmp_path, steps=4, log_every=2, metrics_hook=True)
    with using_host(host):
        train_loop(
            MLP(16, 32, rngs=nnx.Rngs(0)),
            cfg,
            supervised(mse, ArrayBatches(data(64), 8)),
            name="hooked",
        )
    assert [(r, s) for r, s, _ in seen] == [("hooked", 2), ("hooked", 4)]
    recs = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in recs] == pytest.approx([loss for *_, loss in seen])

    out = io.StringIO()
    bar = Progress(10, stage="sft", enabled=True, stream=out)
    bar.update(5, {"loss": 1.5})
    bar.update(10)
    bar.close()
    text = out.getvalue()
    assert "sft" in text and "10/10" in text and "step/s" in text and "loss=1.5" in text
    assert Progress(10, stream=io.StringIO(), enabled=False).status()  # silent, still counts


def test_epochs_and_step_indexed_batches() -> None:
    from studio_align.training.loop import TrainConfig

    src = ArrayBatches({"i": np.arange(10)}, 4, seed=3)
    assert src.steps_per_epoch == 2
    assert TrainConfig(epochs=1.5).total_steps(src.steps_per_epoch) == 3
    assert TrainConfig(steps=7, epochs=1.5).total_steps(2) == 7
    with pytest.raises(ConfigError, match=r"train\.steps"):
        TrainConfig().total_steps(2)
    # a batch depends only on (seed, step): the basis of exact resume
    again = ArrayBatches({"i": np.arange(10)}, 4, seed=3)
    for step in (0, 1, 5, 2):
        np.testing.assert_array_equal(src(step)["i"], again(step)["i"])
    epoch0 = np.concatenate([src(0)["i"], src(1)["i"]])
    assert len(set(epoch0.tolist())) == 8  # no repeats within an epoch
    assert not np.array_equal(src(0)["i"], src(2)["i"])  # reshuffled next epoch


def test_diverged_run_stops_before_checkpointing_nan_weights(tmp_path: Path) -> None:
    from studio_align.errors import TrainingError
    from studio_align.training.checkpoint import Checkpointer

    model = MLP(16, 32, rngs=nnx.Rngs(0))
    cfg = _cfg(tmp_path, steps=12, log_every=4)
    cfg.checkpoint.every = 2
    cfg.checkpoint.async_save = False
    arrays = data(96)

    def source(step: int) -> dict:
        batch = {k: v[(step % 12) * 8 : (step % 12) * 8 + 8].copy() for k, v in arrays.items()}
        if step == 5:  # a poisoned batch: the loss and every later parameter become NaN
            batch["y"][:] = np.inf
        return batch

    with pytest.raises(TrainingError, match="step 6"):
        train_loop(model, cfg, supervised(mse, source))
    saved = Checkpointer(tmp_path / "checkpoints", every=2, keep=10).all_steps()
    assert max(saved) == 4  # the checkpoint after the poisoned step was never written
