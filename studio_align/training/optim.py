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
- `lr_scale` gives groups of parameters their own learning rate (a pretrained encoder
  under a fresh head, say): the final update of a parameter whose path has a part of
  that name is multiplied, after the optimizer and before the moving average.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import optax

from studio_align.training.ema import ema_weights
from studio_align.training.run_config import DecayName as DecayName
from studio_align.training.run_config import OptimConfig as OptimConfig
from studio_align.training.run_config import OptimizerName as OptimizerName


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


def _path_names(path: tuple[Any, ...]) -> set[str]:
    return {str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k)))) for k in path}


def scale_by_path(scales: Mapping[str, float]) -> optax.GradientTransformation:
    """Multiply each update by the product of `scales[name]` over the names in its path.

    Stateless, and the factors are Python floats fixed at trace time, so the compiled step
    only gains one multiply for each parameter that is in a group."""

    def factor(path: tuple[Any, ...]) -> float:
        f = 1.0
        for name in _path_names(path) & scales.keys():
            f *= scales[name]
        return f

    def update(updates: optax.Updates, state: optax.EmptyState, params: Any = None) -> Any:
        del params
        scaled = jax.tree_util.tree_map_with_path(
            lambda path, u: u if (f := factor(path)) == 1.0 else u * f, updates
        )
        return scaled, state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


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
    if cfg.lr_scale:
        opt = optax.chain(opt, scale_by_path(cfg.lr_scale))
    if cfg.ema_decay:  # last, so `ema.ema_of` finds it at the end of the chain's state
        opt = optax.chain(opt, ema_weights(cfg.ema_decay))
    return opt, lr
