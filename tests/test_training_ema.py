"""`[optim] ema_decay`: a moving average of the weights, kept in the optimizer state."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx

sys.path.insert(0, str(Path(__file__).parent))
from _training_worker import MLP, data, mse

from studio_align.config import validate
from studio_align.errors import ConfigError
from studio_align.training.batches import ArrayBatches
from studio_align.training.ema import ema_of
from studio_align.training.loop import TrainRunConfig, train_loop
from studio_align.training.optim import OptimConfig, make_optimizer
from studio_align.training.supervised import supervised

DECAY = 0.8
STEPS = 6


def _cfg(run_dir: Path, ema: float | None, **checkpoint) -> TrainRunConfig:
    return validate(
        TrainRunConfig,
        {
            "run_dir": str(run_dir),
            "train": {"steps": STEPS, "batch_size": 8, "progress": False, "metrics_hook": False},
            "optim": {"name": "sgd", "learning_rate": 0.1, "clip_grad_norm": None,
                      "decay": "constant", "ema_decay": ema},
            "checkpoint": {"every": 0, **checkpoint},
        },
    )  # fmt: skip


def _params(model: nnx.Module) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(model, nnx.Param))]


def test_ema_follows_the_formula_and_leaves_training_unchanged(tmp_path: Path) -> None:
    """Each step's weights replayed by hand: plain SGD on the same batches gives every
    intermediate point, and the loop must hand back their warmed-up average."""
    batches = ArrayBatches(data(64), 8)
    model = MLP(16, 32, rngs=nnx.Rngs(0))
    init = _params(model)
    plain = MLP(16, 32, rngs=nnx.Rngs(0))
    tx, _ = make_optimizer(_cfg(tmp_path / "plain", None).optim, STEPS)
    graphdef, params, rest = nnx.split(plain, nnx.Param, ...)
    opt_state = tx.init(params)
    expected = init
    for step in range(STEPS):
        batch = {k: np.asarray(v) for k, v in batches(step).items()}

        def loss(p, batch=batch):
            return mse(nnx.merge(graphdef, p, rest), batch)[0]

        grads = jax.grad(loss)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = jax.tree.map(lambda p, u: p + u, params, updates)
        t = step + 1
        d = min(DECAY, 1 - 1 / t)
        expected = [d * e + (1 - d) * np.asarray(p)
                    for e, p in zip(expected, jax.tree.leaves(params), strict=True)]  # fmt: skip
    last_step = [np.asarray(p) for p in jax.tree.leaves(params)]

    cfg = _cfg(tmp_path / "ema", DECAY)
    res = train_loop(model, cfg, supervised(mse, batches))
    assert res.compiles == 1
    got = _params(model)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    # the average is not the last step's weights: the check above could not pass by accident
    assert max(float(np.abs(g - w).max()) for g, w in zip(got, last_step, strict=True)) > 1e-3

    # the updates pass through unchanged: the same run without EMA ends at the last step
    model2 = MLP(16, 32, rngs=nnx.Rngs(0))
    cfg = _cfg(tmp_path / "off", None)
    train_loop(model2, cfg, supervised(mse, batches))
    for g, w in zip(_params(model2), last_step, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_ema_is_checkpointed_and_resumes_exactly(tmp_path: Path) -> None:
    """A run stopped at step 3 and resumed ends on the uninterrupted run's average, bit for bit."""
    batches = ArrayBatches(data(64), 8)
    whole = MLP(16, 32, rngs=nnx.Rngs(0))
    cfg = _cfg(tmp_path / "whole", DECAY, every=3)
    train_loop(whole, cfg, supervised(mse, batches))

    run = tmp_path / "split"
    half = MLP(16, 32, rngs=nnx.Rngs(0))
    cfg = _cfg(run, DECAY, every=3)
    train_loop(half, cfg, supervised(mse, batches), total_steps=3)  # stops after step 3's save
    resumed = MLP(16, 32, rngs=nnx.Rngs(1))  # other weights: all of them come from the checkpoint
    res = train_loop(resumed, _cfg(run, DECAY, every=3, resume=True), supervised(mse, batches))
    assert res.resumed_from == 3
    for a, b in zip(_params(resumed), _params(whole), strict=True):
        np.testing.assert_array_equal(a, b)


def test_ema_state_is_found_and_sharded_like_the_params() -> None:
    opt = OptimConfig(name="adamw", ema_decay=0.9)
    tx, _ = make_optimizer(opt, 10)
    params = {"w": np.ones((3, 2), np.float32)}
    state = tx.init(params)
    ema = ema_of(state)
    assert ema is not None and ema["w"].shape == (3, 2)
    assert ema_of(make_optimizer(OptimConfig(), 10)[0].init(params)) is None


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5])
def test_bad_decay_names_the_key(bad: float, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ema_decay"):
        _cfg(tmp_path, bad)
