"""KTO trainer: unpaired desirable/undesirable samples with a per-batch KL reference point.

Design choices:
- Each batch row carries a sample (`tokens/attn/loss`), its label `desirable`, and a
  mismatched pair (`kl_*`: the same prompt with another sample's completion) whose
  policy/reference log-ratio estimates the KL reference point z0, as in the KTO paper.
  Sample and mismatched pair go through ONE forward pass (concatenated).
- Reference log-probs of both are computed once per (reference, dataset) and cached
  (`ref_cache.py`), like DPO's.
- Class imbalance is handled with `desirable_weight` / `undesirable_weight`; the paper
  recommends keeping `w_d * n_d / (w_u * n_u)` in [1, 4/3]. `balanced_weights` computes
  weights that give 1 for a dataset.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.algorithms import kto_loss
from studio_align.models.logprobs import token_logps
from studio_align.tasks import StartingPoint
from studio_align.training.batches import ArrayBatches
from studio_align.training.distributed import maybe_initialize
from studio_align.training.kto_config import KTOConfig as KTOConfig
from studio_align.training.kto_config import KTORunConfig as KTORunConfig
from studio_align.training.loop import train_loop
from studio_align.training.packing import pack_unpaired
from studio_align.training.ref_cache import arrays_digest, batched_apply, cached_arrays, tree_digest
from studio_align.training.run import (
    PreferenceResult,
    prepare_run_dir,
    read_split,
    resolve_task,
    save_for_task,
)
from studio_align.training.supervised import supervised

FIELDS = ("tokens", "attn", "loss", "kl_tokens", "kl_attn", "kl_loss")


def balanced_weights(desirable: np.ndarray, undesirable_weight: float = 1.0) -> tuple[float, float]:
    """(w_d, w_u) with w_d * n_d == w_u * n_u (the paper's recommended ratio of 1)."""
    n_d = int(np.sum(desirable))
    n_u = len(desirable) - n_d
    if n_d == 0 or n_u == 0:
        return 1.0, undesirable_weight
    return undesirable_weight * n_u / n_d, undesirable_weight


def sample_logps(model: nnx.Module, batch: Mapping[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
    """Summed completion log-probs `[B]` of the samples and of their mismatched pairs."""
    b = batch["tokens"].shape[0]
    tokens = jnp.concatenate([batch["tokens"], batch["kl_tokens"]])
    attn = jnp.concatenate([batch["attn"], batch["kl_attn"]])
    mask = jnp.concatenate([batch["loss"], batch["kl_loss"]])[:, 1:]
    lp = token_logps(cast(Any, model), tokens, attn)
    sums = jnp.sum(lp * mask.astype(lp.dtype), axis=1)
    return sums[:b], sums[b:]


def make_kto_loss(
    cfg: KTOConfig, *, desirable_weight: float | None = None
) -> Callable[[nnx.Module, Mapping[str, jax.Array]], tuple]:
    """`loss_fn(model, batch) -> (loss, metrics)`; batch has `ref_logps`, `ref_kl_logps`."""
    wd = desirable_weight if desirable_weight is not None else (cfg.desirable_weight or 1.0)
    wu, beta = cfg.undesirable_weight, cfg.beta

    def loss_fn(model: nnx.Module, batch: Mapping[str, jax.Array]) -> tuple:
        logps, kl_logps = sample_logps(model, batch)
        return kto_loss(
            logps,
            batch["ref_logps"],
            batch["desirable"],
            kl_policy_logps=kl_logps,
            kl_ref_logps=batch["ref_kl_logps"],
            beta=beta,
            desirable_weight=wd,
            undesirable_weight=wu,
        )

    return loss_fn


@partial(jax.jit, static_argnames=("graphdef",))
def _score_samples(graphdef: Any, state: Any, batch: Mapping[str, jax.Array]) -> Any:
    """Sample and KL-pair log-probs; module level so every evaluation reuses one compile."""
    return sample_logps(nnx.merge(graphdef, state), batch)


def reference_logps(
    ref_model: nnx.Module,
    samples: Mapping[str, np.ndarray],
    *,
    batch_size: int = 32,
    cache_dir: str | Path | None = None,
) -> tuple[dict[str, np.ndarray], bool]:
    """`{ref_logps, ref_kl_logps} [N]` under the reference, cached on disk."""
    graphdef, state = nnx.split(ref_model)
    fields = {k: samples[k] for k in FIELDS}

    def score(batch: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        lp, kl = _score_samples(graphdef, state, batch)
        return {"ref_logps": lp, "ref_kl_logps": kl}

    arrays, _, hit = cached_arrays(
        cache_dir,
        kind="kto-ref",
        reference=tree_digest(nnx.state(ref_model)),
        dataset=arrays_digest(fields),
        compute=lambda: batched_apply(score, fields, batch_size=batch_size),
    )
    return arrays, hit


def evaluate_samples(
    model: nnx.Module,
    samples: Mapping[str, np.ndarray],
    ref: Mapping[str, np.ndarray],
    *,
    batch_size: int = 32,
) -> dict[str, float]:
    """Held-out figures: mean log-ratio (implicit reward / beta) of desirable and
    undesirable samples and their gap; `auc`, the fraction of (desirable, undesirable)
    pairs whose log-ratios are ordered correctly (ties count half; 0.5 = no signal); and
    `accuracy`, the fraction on the right side of the KL reference point z0."""
    graphdef, state = nnx.split(model)
    fields = {k: samples[k] for k in FIELDS}

    def score(batch: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        lp, kl = _score_samples(graphdef, state, batch)
        return {"lp": lp, "kl": kl}

    s = batched_apply(score, fields, batch_size=batch_size)
    ratio = s["lp"] - ref["ref_logps"]
    z0 = max(0.0, float(np.mean(s["kl"] - ref["ref_kl_logps"])))
    good = samples["desirable"].astype(bool)
    out = {
        "accuracy": float(np.mean((ratio > z0) == good)),
        "kl": z0,
        "logratio/desirable": float(ratio[good].mean()) if good.any() else 0.0,
        "logratio/undesirable": float(ratio[~good].mean()) if (~good).any() else 0.0,
    }
    out["logratio/gap"] = out["logratio/desirable"] - out["logratio/undesirable"]
    if good.any() and (~good).any():
        diff = ratio[good][:, None] - ratio[~good][None, :]
        out["auc"] = float(np.mean((diff > 0) + 0.5 * (diff == 0)))
    return out


# -- the `train kto` run ---------------------------------------------------------------------


@dataclass
class KTOResult(PreferenceResult):
    desirable_weight: float = 1.0  # weight of desirable samples (balanced if not set)


def train_kto(
    cfg: KTORunConfig, *, task: Any = None, start: StartingPoint | None = None
) -> KTOResult:
    """Tune `task` (default: `cfg.task`) with KTO on its unpaired samples (for the router,
    accepted routes are desirable and abandoned ones are not)."""
    maybe_initialize(cfg.distributed)  # before the task touches a device
    task = resolve_task(task or cfg.task, "kto")
    start = start or task.start(cfg.model, seed=cfg.train.seed)
    pad_id = start.tokenizer.pad_id
    train = pack_unpaired(
        *task.kto_samples(start, read_split(task, cfg.data, "kto", "train")),
        pad_id=pad_id,
        length=cfg.data.max_len,
    )
    held_records = read_split(task, cfg.data, "kto", "heldout")
    held_cols = task.kto_samples(start, held_records) if held_records else ([], [], [])
    held = (
        pack_unpaired(*held_cols, pad_id=pad_id, length=cfg.data.max_len)
        if len(held_cols[0]) >= 2
        else None
    )
    run_dir = prepare_run_dir(cfg)
    cache_dir = cfg.kto.cache_dir or run_dir / "ref_cache"
    ref, hit = reference_logps(
        start.reference, train, batch_size=cfg.kto.ref_batch_size, cache_dir=cache_dir
    )
    wd = cfg.kto.desirable_weight
    if wd is None:
        wd, _ = balanced_weights(train["desirable"], cfg.kto.undesirable_weight)
    eval_fn = None
    before: dict[str, float] = {}
    if held is not None:
        ref_held, _ = reference_logps(
            start.reference, held, batch_size=cfg.kto.ref_batch_size, cache_dir=cache_dir
        )

        def eval_fn(model: nnx.Module) -> dict[str, float]:
            return evaluate_samples(model, held, ref_held, batch_size=cfg.data.eval_batch_size)

        before = eval_fn(start.model)
    batches = ArrayBatches({**train, **ref}, cfg.train.batch_size, seed=cfg.train.seed)
    result = train_loop(
        start.model, cfg, supervised(make_kto_loss(cfg.kto, desirable_weight=wd), batches),
        eval_fn=eval_fn, wrt=start.wrt or nnx.Param, name="kto",
    )  # fmt: skip
    metrics = {**result.metrics, **{f"eval/{k}": v for k, v in result.eval_metrics.items()}}
    path = save_for_task(task, start, run_dir, trained_by="kto", metrics=metrics)
    return KTOResult(
        metrics=result.metrics,
        heldout_before=before,
        heldout_after=result.eval_metrics,
        checkpoint=path,
        run_dir=run_dir,
        reference_cache_hit=hit,
        desirable_weight=float(wd),
        train=result,
    )
