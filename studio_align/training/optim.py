"""Optimizers from config: optax transformation + learning-rate schedule.

Design choices:
- One `OptimConfig` names the optimizer, the schedule (linear warm-up, then cosine,
  linear or constant decay) and global-norm clipping. `make_optimizer` turns it into a
  plain `optax.GradientTransformation`; nothing else in the trainers knows which one.
- Gradient accumulation is *not* an optax wrapper here: the train step scans over
  micro-batches and applies one update per step (see `accumulate.py`), so step counts,
  schedules and checkpoints all count optimizer updates, and the accumulated gradient
  equals the big-batch gradient exactly (tested).
- `ema_decay` chains a moving average of the weights last (`ema.py`); the trainers export
  it instead of the last step's weights.
- Weight decay skips vectors and scalars (norm scales, biases) by default, as is usual
  for transformers; `decay_all = true` decays everything.
"""

from __future__ import annotations

from typing import Literal

import jax
import optax
from pydantic import Field

from studio_align.config import Strict
from studio_align.training.ema import ema_weights

OptimizerName = Literal["adamw", "adam", "sgd", "lion", "adafactor"]
DecayName = Literal["cosine", "linear", "constant"]


class OptimConfig(Strict):
    """`[optim]`: optimizer, schedule and clipping."""

    name: OptimizerName = "adamw"
    learning_rate: float = Field(3e-4, gt=0)
    warmup_steps: int = Field(0, ge=0)
    decay: DecayName = "cosine"
    decay_steps: int | None = Field(None, ge=1)  # None: the run's remaining steps after warm-up
    final_lr_ratio: float = Field(0.1, ge=0, le=1)  # lr at the end of decay, as a fraction
    weight_decay: float = Field(0.0, ge=0)
    decay_all: bool = False  # also decay vectors/scalars (norm scales, biases)
    b1: float = Field(0.9, ge=0, lt=1)
    b2: float = Field(0.999, ge=0, lt=1)
    eps: float = Field(1e-8, gt=0)
    momentum: float = Field(0.0, ge=0, lt=1)  # sgd only
    nesterov: bool = False  # sgd only
    clip_grad_norm: float | None = Field(1.0, ge=0)  # 0 (or None): no clipping
    # a moving average of the weights, exported instead of the last step's (`ema.py`)
    ema_decay: float | None = Field(None, gt=0, lt=1)


def make_schedule(cfg: OptimConfig, total_steps: int) -> optax.Schedule:
    """Linear warm-up from 0 to `learning_rate`, then the configured decay.

    Decay runs over `decay_steps` (default: `total_steps - warmup_steps`) down to
    `learning_rate * final_lr_ratio` and stays there afterwards.
    """
    peak = cfg.learning_rate
    end = peak * cfg.final_lr_ratio
    decay_steps = cfg.decay_steps or max(1, total_steps - cfg.warmup_steps)
    if cfg.decay == "cosine":
        after = optax.cosine_decay_schedule(peak, decay_steps, alpha=cfg.final_lr_ratio)
    elif cfg.decay == "linear":
        after = optax.linear_schedule(peak, end, decay_steps)
    else:
        after = optax.constant_schedule(peak)
    if cfg.warmup_steps == 0:
        return after
    warm = optax.linear_schedule(0.0, peak, cfg.warmup_steps)
    return optax.join_schedules([warm, after], [cfg.warmup_steps])


def _decay_mask(params: optax.Params) -> optax.Params:
    return jax.tree.map(lambda p: getattr(p, "ndim", 0) >= 2, params)


def make_optimizer(
    cfg: OptimConfig, total_steps: int
) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """Return `(tx, schedule)`: clipping (if any) chained before the chosen optimizer."""
    lr = make_schedule(cfg, total_steps)
    mask = None if cfg.decay_all else _decay_mask
    if cfg.name == "adamw":
        opt = optax.adamw(
            lr, b1=cfg.b1, b2=cfg.b2, eps=cfg.eps, weight_decay=cfg.weight_decay, mask=mask
        )
    elif cfg.name == "adam":
        opt = optax.adam(lr, b1=cfg.b1, b2=cfg.b2, eps=cfg.eps)
    elif cfg.name == "sgd":
        opt = optax.sgd(lr, momentum=cfg.momentum or None, nesterov=cfg.nesterov)
    elif cfg.name == "lion":
        opt = optax.lion(lr, b1=cfg.b1, b2=cfg.b2, weight_decay=cfg.weight_decay, mask=mask)
    else:  # adafactor: factored second moments, its own update clipping
        opt = optax.adafactor(
            lr, weight_decay_rate=cfg.weight_decay or None, weight_decay_mask=mask
        )
    if cfg.name in ("adam", "sgd") and cfg.weight_decay > 0:
        opt = optax.chain(optax.add_decayed_weights(cfg.weight_decay, mask=mask), opt)
    if cfg.clip_grad_norm:
        opt = optax.chain(optax.clip_by_global_norm(cfg.clip_grad_norm), opt)
    if cfg.ema_decay:  # last, so `ema.ema_of` finds it at the end of the chain's state
        opt = optax.chain(opt, ema_weights(cfg.ema_decay))
    return opt, lr
