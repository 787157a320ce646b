"""Fit a Bradley-Terry preference head through the shared train loop.

The reward model trains like every other model in studio-align: `training.train_loop`
builds the one train state (placement on the mesh, the donated jitted update), writes
`metrics.jsonl`, fires the metrics hook and checkpoints with orbax, so `checkpoint.resume`
means here what it means for SFT, DPO, KTO and GRPO, and a killed `train reward` resumes
exactly.

Design choices:
- A step's batch is step-indexed (`np.random.default_rng([seed, step])`), which is what
  makes resume exact: the batch of step s does not depend on the steps before it.
- The loop wants one leading batch size for every field, and pairs and ratings come in
  different numbers. Both minibatches are padded to one size (a multiple of the mesh's
  data parallelism) and carry 0/1 row weights, so padding never changes the loss.
- Features are gathered on the host per step (`[B, dim]`), not closed over: a jitted
  program never embeds the whole feature matrix as a constant.
- The optimizer is the configured AdamW at a constant rate with weight decay on every
  parameter and no clipping: the head is small and full-batch steps are well scaled.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from studio_align.algorithms.bradley_terry import bradley_terry_loss
from studio_align.algorithms.pointwise import POINTWISE_LOSSES
from studio_align.models.sharding import batch_parallelism, make_mesh
from studio_align.reward_models.preference import PairData, PreferenceModel
from studio_align.training.checkpoint import CheckpointConfig
from studio_align.training.distributed import is_main_process
from studio_align.training.loop import TrainConfig, TrainRunConfig, train_loop
from studio_align.training.metrics import read_metrics
from studio_align.training.optim import OptimConfig
from studio_align.training.supervised import supervised


@dataclass
class FitConfig:
    steps: int = 400
    learning_rate: float = 3e-3
    weight_decay: float = 1e-3
    batch_size: int = 512
    creator_l2: float = 1e-2
    seed: int = 0
    ratings_weight: float = 1.0
    ratings_loss: str = "logistic"  # a key of algorithms.pointwise.POINTWISE_LOSSES
    log_every: int = 10


def _rows(rng: np.random.Generator, n: int, size: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """`size` distinct row indices out of `n` (all of them when `size >= n`), padded with
    index 0 to `width`, and their 0/1 weights."""
    idx = rng.choice(n, size=size, replace=False) if 0 < size < n else np.arange(min(n, size))
    w = np.zeros((width,), np.float32)
    w[: len(idx)] = 1.0
    return np.pad(idx, (0, width - len(idx))).astype(np.int32), w


def preference_batches(data: PairData, cfg: FitConfig, n_rated: int, width: int) -> Callable:
    """Step-indexed batches of `width` rows: pairs and ratings, each with 0/1 row weights."""
    feats = np.asarray(data.features, np.float32)
    n = len(data)
    bs, rbs = min(cfg.batch_size, n), min(cfg.batch_size, n_rated)
    zeros_x = np.zeros((width, feats.shape[1]), np.float32)
    unknown = np.full((width,), -1, np.int32)

    def source(step: int) -> dict[str, np.ndarray]:
        idx, pair_w = _rows(np.random.default_rng([cfg.seed, step]), n, bs, width)
        ridx, rated_w = _rows(np.random.default_rng([cfg.seed, 7, step]), n_rated, rbs, width)
        batch = {"pair_w": pair_w, "rated_w": rated_w}
        if n:
            batch |= {
                "chosen": feats[data.chosen[idx]],
                "rejected": feats[data.rejected[idx]],
                "creator": data.creator[idx],
            }
        else:  # ratings only: the pair rows are all padding
            batch |= {"chosen": zeros_x, "rejected": zeros_x, "creator": unknown}
        if n_rated:
            batch |= {
                "rated": feats[data.rated[ridx]],
                "rated_up": data.rated_up[ridx],
                "rated_creator": data.rated_creator[ridx],
            }
        else:
            batch |= {
                "rated": zeros_x,
                "rated_up": np.zeros((width,), bool),
                "rated_creator": unknown,
            }
        return batch

    return source


def preference_loss(cfg: FitConfig, use_ratings: bool) -> Callable:
    """`(model, batch) -> (loss, metrics)`: BT on pairs + L2 on creator deltas + ratings."""
    point = POINTWISE_LOSSES[cfg.ratings_loss]
    rw = cfg.ratings_weight if use_ratings else 0.0

    def loss_fn(m: PreferenceModel, b: Any) -> tuple[jax.Array, dict[str, jax.Array]]:
        k = b["creator"]
        has_pairs = jnp.sum(b["pair_w"]) > 0  # ratings only: the pair term is zero
        bt, metrics = bradley_terry_loss(
            m(b["chosen"], k), m(b["rejected"], k), weights=b["pair_w"]
        )
        loss = jnp.where(has_pairs, bt, 0.0) + cfg.creator_l2 * jnp.sum(m.delta.value**2)
        if rw:
            scores = m(b["rated"], b["rated_creator"])
            p_loss, _ = point(scores, b["rated_up"], m.reference.value, weights=b["rated_w"])
            loss = loss + rw * p_loss
        return loss, {"pair_accuracy": metrics["accuracy"]}

    return loss_fn


def fit_preference(
    model: PreferenceModel,
    data: PairData,
    cfg: FitConfig,
    run: TrainRunConfig | None = None,
) -> list[float]:
    """Train `model` on `data` in place; returns the loss curve (one value per log window).

    `run` holds the run directory (metrics, checkpoints), mesh, checkpoint and distributed
    sections; `run.train` and `run.optim` are set here from `cfg`. Without `run`, the fit
    uses a throwaway directory. With ratings in `data` (and `model.ratings`), each step adds
    `ratings_weight` times the pointwise loss of a rating minibatch.
    """
    feats = np.asarray(data.features, np.float32)
    n_r = len(data.rated) if model.ratings and cfg.ratings_weight > 0 else 0
    if len(data) == 0 and n_r == 0:
        raise ValueError("fit_preference: no pairs and no ratings")
    used = np.unique(np.concatenate([data.chosen, data.rejected, data.rated[:n_r]]))
    model.mean.value = jnp.asarray(feats[used].mean(0))
    model.std.value = jnp.asarray(feats[used].std(0) + 1e-4)
    scratch = (
        contextlib.nullcontext(None)
        if run is not None
        else tempfile.TemporaryDirectory(prefix="studio-align-fit-")
    )
    with scratch as tmp:
        base = run or TrainRunConfig(
            run_dir=Path(str(tmp)), checkpoint=CheckpointConfig(every=0, async_save=False)
        )
        par = batch_parallelism(make_mesh(base.mesh))
        width = max(min(cfg.batch_size, len(data)), min(cfg.batch_size, n_r), 1)
        width = -(-width // par) * par
        run_cfg = base.model_copy(
            update={
                "train": TrainConfig(
                    steps=cfg.steps,
                    batch_size=width,
                    seed=cfg.seed,
                    log_every=min(cfg.log_every, cfg.steps),
                    progress=base.train.progress,
                    metrics_hook=base.train.metrics_hook,
                ),
                "optim": OptimConfig(
                    learning_rate=cfg.learning_rate,
                    weight_decay=cfg.weight_decay,
                    decay="constant",
                    decay_all=True,
                    clip_grad_norm=None,
                ),
            }
        )
        main = is_main_process()
        result = train_loop(
            model,
            run_cfg,
            supervised(preference_loss(cfg, n_r > 0), preference_batches(data, cfg, n_r, width)),
            name="reward",
        )
        # the whole run's curve, also when this call resumed (or found the run finished)
        # (metrics.jsonl is process 0's: the others report their own, identical, history)
        kept = run_cfg.run_dir if run is not None and main else None
        records = read_metrics(kept) if kept is not None else result.history
    return [float(h["loss"]) for h in records if h.get("loss") is not None]
