"""Subprocess worker for the sharding and resume tests (XLA flags must precede jax import).

Usage: python _training_worker.py RUN_DIR OUT.npz [--transformer [--packed]] [--set k=v ...]
Trains a tiny MLP regressor (or, with --transformer, the engine's tiny Transformer with
the SFT loss, its batches packed into rows with --packed) with `train_loop` and writes the
per-step losses, the final parameters and their shardings to OUT.npz.

Under `[distributed]` each process writes OUT with its process index before the suffix
(`out.1.npz`), adding `rows`: for every step, the example ids (an `id` column of the data)
that `place_batch` put on this process's devices, so a test can count them.
"""

from __future__ import annotations

import math
import sys

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.config import apply_overrides, validate
from studio_align.models.sharding import make_mesh
from studio_align.training.batches import ArrayBatches
from studio_align.training.distributed import maybe_initialize, replicated
from studio_align.training.loop import TrainRunConfig, train_loop
from studio_align.training.packed import PackedBatches
from studio_align.training.supervised import place_batch, supervised


class MLP(nnx.Module):
    def __init__(self, d_in: int, d_hidden: int, *, rngs: nnx.Rngs):
        self.l1 = nnx.Linear(d_in, d_hidden, rngs=rngs)
        self.l2 = nnx.Linear(d_hidden, d_hidden, rngs=rngs)
        self.out = nnx.Linear(d_hidden, 1, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.out(nnx.gelu(self.l2(nnx.gelu(self.l1(x)))))[..., 0]


def mse(model: MLP, batch: dict) -> tuple[jax.Array, dict]:
    pred = model(batch["x"])
    return jnp.mean((pred - batch["y"]) ** 2), {}


def data(n: int = 256, d: int = 16, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    w = rng.normal(size=(d,)).astype(np.float32)
    return {"x": x, "y": np.tanh(x @ w / 4).astype(np.float32), "id": np.arange(n)}


def transformer_task(seed: int) -> tuple[nnx.Module, object, ArrayBatches]:
    """The engine's tiny Transformer with the SFT loss on synthetic prompt/completion pairs."""
    from studio_align.models.config import ModelConfig
    from studio_align.models.transformer import Transformer
    from studio_align.training.sft import encode_pairs, sft_loss

    rng = np.random.default_rng(0)
    pairs = []
    for _ in range(128):
        prompt = rng.integers(2, 32, size=rng.integers(3, 9)).tolist()
        pairs.append((prompt, [2 + (prompt[-1] * 7) % 30, 1]))
    arrays = encode_pairs(pairs, 16, 0)
    return Transformer(ModelConfig.tiny(32), rngs=nnx.Rngs(seed)), sft_loss, arrays


def main(argv: list[str]) -> None:
    run_dir, out, *rest = argv
    overrides = [a for a in rest if a not in ("--set", "--transformer", "--packed")]
    base = {
        "run_dir": run_dir,
        "train": {
            "steps": 12,
            "batch_size": 16,
            "log_every": 1,
            "progress": False,
            "metrics_hook": False,
        },
        "optim": {"learning_rate": 1e-2, "warmup_steps": 2},
        "mesh": {"min_shard_size": 0},
        "checkpoint": {"every": 4, "keep": 2},
    }
    cfg = validate(TrainRunConfig, apply_overrides(base, overrides))
    distributed = maybe_initialize(cfg.distributed)
    if "--transformer" in rest:
        model, loss_fn, arrays = transformer_task(cfg.train.seed)
    else:
        model, loss_fn, arrays = MLP(16, 64, rngs=nnx.Rngs(cfg.train.seed)), mse, data()
    batches = ArrayBatches(arrays, cfg.train.batch_size, seed=cfg.train.seed)
    if "--packed" in rest:
        rows = math.lcm(2, jax.device_count())
        batches = PackedBatches(batches, 16, rows_multiple=rows, groups=cfg.train.grad_accum)
    res = train_loop(model, cfg, supervised(loss_fn, batches))
    params = replicated(nnx.state(model, nnx.Param))  # every process: a collective
    flat = {"p/" + "/".join(map(str, k)): np.asarray(v) for k, v in nnx.to_flat_state(params)}
    losses = [h["loss"] for h in res.history if "loss" in h]
    steps = [h["step"] for h in res.history if "loss" in h]
    specs = {
        "s/" + "/".join(map(str, k)): str(v.sharding.spec)
        for k, v in nnx.to_flat_state(nnx.state(model, nnx.Param))
    }
    extra = {}
    if distributed:
        out = out.removesuffix(".npz") + f".{jax.process_index()}.npz"
        extra["rows"] = np.array([local_rows(batches(s), cfg) for s in range(res.step)])
    np.savez(
        out,
        losses=np.array(losses),
        steps=np.array(steps),
        compiles=res.compiles,
        devices=jax.device_count(),
        **flat,
        **specs,
        **extra,
    )


def local_rows(batch: dict, cfg: TrainRunConfig) -> np.ndarray:
    """The `id`s of `batch` that `place_batch` puts on this process's devices, in order."""
    placed = place_batch(batch, cfg.train.grad_accum, cfg.train.batch_size, make_mesh(cfg.mesh))
    shards = {
        tuple(d.start or 0 for d in s.index): np.asarray(s.data)
        for s in placed["id"].addressable_shards
    }  # keyed by position: devices holding the same rows (a replicated axis) count once
    return np.concatenate([shards[k].reshape(-1) for k in sorted(shards)])


if __name__ == "__main__":
    main(sys.argv[1:])
