"""DPO-family trainer: pairs in, the engine's train loop, cached reference log-probs.

Design choices:
- The loss variant is chosen here, at the config edge: `make_dpo_loss(cfg)` returns a
  `loss_fn(model, batch)` closed over one algorithm function from `studio_align.algorithms`
  (DPO with loss types sigmoid/cDPO, ipo, hinge, robust; or reference-free simpo/orpo),
  so the jitted step never sees a string.
- Chosen and rejected are scored in ONE forward pass (`pair_scoring.py`): one row
  `[prompt, chosen, rejected]` per pair when both sides share the prompt (the prompt is
  computed once), else both sides concatenated along the batch.
- The reference model is used once: `reference_logps` scores the whole dataset before
  training and caches the result on disk (`ref_cache.py`), keyed by the reference's
  parameters and the dataset's tokens. IPO, SimPO and ORPO use length-normalised
  log-probs (per their papers); sigmoid/hinge/robust use sums.
- The batch carries `ref_chosen_logps` / `ref_rejected_logps [B]` next to the tokens, so
  the loss is a pure function of `(model, batch)` as the train loop requires.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.algorithms import dpo_loss, orpo_loss, simpo_loss
from studio_align.tasks import StartingPoint
from studio_align.training.batches import ArrayBatches
from studio_align.training.distributed import maybe_initialize
from studio_align.training.dpo_config import DPOConfig as DPOConfig
from studio_align.training.dpo_config import DPOLossType as DPOLossType
from studio_align.training.dpo_config import DPORunConfig as DPORunConfig
from studio_align.training.loop import train_loop
from studio_align.training.packing import pack_pairs
from studio_align.training.pair_scoring import (
    PAIR_FIELDS,
    carried_layout,
    pair_logps,
)
from studio_align.training.ref_cache import arrays_digest, batched_apply, cached_arrays, tree_digest
from studio_align.training.replay import replay_nll, replay_records, with_replay
from studio_align.training.run import (
    PreferenceResult,
    prepare_run_dir,
    read_split,
    resolve_task,
    save_for_task,
)
from studio_align.training.supervised import supervised

REFERENCE_FREE = ("simpo", "orpo")
LENGTH_NORMALISED = ("ipo", "simpo", "orpo")


def _pair_fields(pairs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {f"{s}_{f}": pairs[f"{s}_{f}"] for s in ("chosen", "rejected") for f in PAIR_FIELDS}


def _normalised(
    out: Mapping[str, jax.Array], length_normalised: bool
) -> tuple[jax.Array, jax.Array]:
    if not length_normalised:
        return out["chosen_logps"], out["rejected_logps"]
    return (
        out["chosen_logps"] / jnp.maximum(out["chosen_len"], 1.0),
        out["rejected_logps"] / jnp.maximum(out["rejected_len"], 1.0),
    )


def chosen_nll(out: Mapping[str, jax.Array]) -> jax.Array:
    """Mean per-token negative log-likelihood of the chosen completions (RPO's SFT term)."""
    return -jnp.mean(out["chosen_logps"] / jnp.maximum(out["chosen_len"], 1.0))


def make_dpo_loss(cfg: DPOConfig) -> Callable[[nnx.Module, Mapping[str, jax.Array]], tuple]:
    """`loss_fn(model, batch) -> (loss, metrics)` for the configured variant."""
    norm = cfg.loss_type in LENGTH_NORMALISED

    if cfg.loss_type == "simpo":

        def objective(c, r, batch):  # type: ignore[no-untyped-def]
            return simpo_loss(
                c, r, beta=cfg.beta, gamma=cfg.simpo_gamma, label_smoothing=cfg.label_smoothing
            )

    elif cfg.loss_type == "orpo":

        def objective(c, r, batch):  # type: ignore[no-untyped-def]
            return orpo_loss(c, r, beta=cfg.beta)

    else:
        loss_type, beta, ls = cfg.loss_type, cfg.beta, cfg.label_smoothing

        def objective(c, r, batch):  # type: ignore[no-untyped-def]
            return dpo_loss(
                c,
                r,
                batch["ref_chosen_logps"],
                batch["ref_rejected_logps"],
                beta=beta,
                loss_type=loss_type,
                label_smoothing=ls,
            )

    alpha, replay_alpha = cfg.nll_alpha, cfg.replay_alpha

    def loss_fn(model: nnx.Module, batch: Mapping[str, jax.Array]) -> tuple:
        out = pair_logps(model, batch)
        c, r = _normalised(out, norm)
        loss, metrics = objective(c, r, batch)
        metrics = dict(metrics)
        if alpha > 0:
            nll = chosen_nll(out)
            loss = loss + alpha * nll
            metrics["loss/nll_chosen"] = jax.lax.stop_gradient(nll)
        if replay_alpha > 0:
            rnll = replay_nll(model, batch)
            loss = loss + replay_alpha * rnll
            metrics["loss/replay_nll"] = jax.lax.stop_gradient(rnll)
        metrics["logps/chosen"] = jax.lax.stop_gradient(jnp.mean(c))
        metrics["logps/rejected"] = jax.lax.stop_gradient(jnp.mean(r))
        return loss, metrics

    return loss_fn


@partial(jax.jit, static_argnames=("graphdef", "norm"))
def _score_pairs(
    graphdef: Any, state: Any, batch: Mapping[str, jax.Array], *, norm: bool
) -> tuple[jax.Array, jax.Array]:
    """(chosen, rejected) log-probs; module level so every evaluation reuses one compile."""
    return _normalised(pair_logps(nnx.merge(graphdef, state), batch), norm)


def reference_logps(
    ref_model: nnx.Module,
    pairs: Mapping[str, np.ndarray],
    *,
    loss_type: DPOLossType = "sigmoid",
    batch_size: int = 32,
    cache_dir: str | Path | None = None,
) -> tuple[dict[str, np.ndarray], bool]:
    """`{ref_chosen_logps, ref_rejected_logps} [N]` under the reference, cached on disk.

    Also returns the pairs' scoring layout beside them (`carried_layout`: shared-prompt
    rows, else completion windows), so a batch built from the pairs and these arrays is
    scored the fast way, the training step too.
    `batch_size` pairs per call: use the training batch size, so the pass runs the same
    program shape as the step's forward. Returns the arrays and whether they came from
    the cache.
    """
    norm = loss_type in LENGTH_NORMALISED
    graphdef, state = nnx.split(ref_model)
    fields = _pair_fields(pairs)
    layout = carried_layout(pairs)

    def score(batch: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        c, r = _score_pairs(graphdef, state, batch, norm=norm)
        return {"ref_chosen_logps": c, "ref_rejected_logps": r}

    arrays, _, hit = cached_arrays(
        cache_dir,
        kind=f"dpo-ref-{'mean' if norm else 'sum'}",
        reference=tree_digest(nnx.state(ref_model)),
        dataset=arrays_digest(fields),
        compute=lambda: batched_apply(score, {**fields, **layout}, batch_size=batch_size),
    )
    return {**arrays, **layout}, hit


def evaluate_pairs(
    model: nnx.Module,
    pairs: Mapping[str, np.ndarray],
    ref: Mapping[str, np.ndarray] | None = None,
    *,
    batch_size: int = 32,
    length_normalised: bool = False,
) -> dict[str, float]:
    """Held-out preference figures.

    `accuracy`: fraction of pairs where the policy gives the chosen completion a higher
    log-prob than the rejected one (the model *prefers* it); with `ref`, also
    `reward_accuracy` (DPO's implicit reward margin > 0) and `reward_margin`. Pass
    `length_normalised=True` when `ref` holds per-token means (IPO / SimPO / ORPO).
    """
    graphdef, state = nnx.split(model)
    fields = _pair_fields(pairs)

    def score(batch: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        c, r = _score_pairs(graphdef, state, batch, norm=length_normalised)
        return {"c": c, "r": r}

    s = batched_apply(score, {**fields, **carried_layout(pairs)}, batch_size=batch_size)
    res = {"accuracy": float(np.mean(s["c"] > s["r"])), "pairs": float(len(s["c"]))}
    if ref is not None:
        margin = (s["c"] - ref["ref_chosen_logps"]) - (s["r"] - ref["ref_rejected_logps"])
        tie = np.abs(margin) <= 1e-6  # policy == reference: float noise, not a preference
        res["reward_accuracy"] = float(np.mean((margin > 0) & ~tie) + 0.5 * np.mean(tie))
        res["reward_margin"] = float(np.mean(margin))
    return res


# -- the `train dpo` run ---------------------------------------------------------------------


def train_dpo(
    cfg: DPORunConfig,
    *,
    task: Any = None,
    start: StartingPoint | None = None,
    replay: Sequence[Mapping[str, Any]] | None = None,
) -> PreferenceResult:
    """Tune `task` (default: `cfg.task`) with the configured DPO-family loss on its pairs;
    `replay`: the labelled records `dpo.replay_alpha` rehearses (else `dpo.replay_data`)."""
    maybe_initialize(cfg.distributed)  # before the task touches a device
    task = resolve_task(task or cfg.task, "dpo")
    records = replay_records(task, cfg.dpo.replay_alpha, replay, cfg.dpo.replay_data)
    start = start or task.start(cfg.model, seed=cfg.train.seed)
    if hasattr(task, "dpo_objective"):
        return _train_objective(cfg, task, start)
    pad_id = start.tokenizer.pad_id
    train_pairs = pack_pairs(
        *task.preference_pairs(start, read_split(task, cfg.data, "dpo", "train")),
        pad_id=pad_id,
        length=cfg.data.max_len,
    )
    held_records = read_split(task, cfg.data, "dpo", "heldout")
    held = (
        pack_pairs(
            *task.preference_pairs(start, held_records), pad_id=pad_id, length=cfg.data.max_len
        )
        if held_records
        else None
    )
    run_dir = prepare_run_dir(cfg)
    cache_dir = cfg.dpo.cache_dir or run_dir / "ref_cache"
    norm = cfg.dpo.loss_type in LENGTH_NORMALISED
    arrays: dict[str, np.ndarray] = dict(train_pairs)  # with its scoring layout
    hit = False
    if cfg.dpo.loss_type not in REFERENCE_FREE:
        ref, hit = reference_logps(
            start.reference, train_pairs, loss_type=cfg.dpo.loss_type,
            batch_size=cfg.dpo.ref_batch_size, cache_dir=cache_dir,
        )  # fmt: skip
        arrays.update(ref)
    eval_fn = None
    before: dict[str, float] = {}
    if held is not None:
        ref_held, _ = reference_logps(
            start.reference, held, loss_type=cfg.dpo.loss_type,
            batch_size=cfg.dpo.ref_batch_size, cache_dir=cache_dir,
        )  # fmt: skip

        def eval_fn(model: nnx.Module) -> dict[str, float]:
            return evaluate_pairs(
                model, held, ref_held, batch_size=cfg.data.eval_batch_size, length_normalised=norm
            )

        before = eval_fn(start.model)
    batches = with_replay(
        ArrayBatches(arrays, cfg.train.batch_size, seed=cfg.train.seed), task, start, records,
        batch_size=cfg.train.batch_size, seed=cfg.train.seed, pad_id=pad_id,
        groups=cfg.train.grad_accum,
    )  # fmt: skip
    result = train_loop(
        start.model, cfg, supervised(make_dpo_loss(cfg.dpo), batches),
        eval_fn=eval_fn, wrt=start.wrt or nnx.Param, name="dpo",
    )  # fmt: skip
    metrics = {**result.metrics, **{f"eval/{k}": v for k, v in result.eval_metrics.items()}}
    path = save_for_task(task, start, run_dir, trained_by=f"dpo:{cfg.dpo.loss_type}",
                         metrics=metrics)  # fmt: skip
    return PreferenceResult(
        metrics=result.metrics,
        heldout_before=before,
        heldout_after=result.eval_metrics,
        checkpoint=path,
        run_dir=run_dir,
        reference_cache_hit=hit,
        train=result,
    )


def _train_objective(cfg: DPORunConfig, task: Any, start: StartingPoint) -> PreferenceResult:
    """`dpo` for a task that brings its own objective (`tasks.SupportsObjectiveDPO`):
    the same run config, loop, checkpoints, held-out metrics and saved model."""
    batches, loss_fn, eval_fn = task.dpo_objective(
        start, read_split(task, cfg.data, "dpo", "train"), cfg.dpo,
        batch_size=cfg.train.batch_size, seed=cfg.train.seed,
        heldout=read_split(task, cfg.data, "dpo", "heldout"),
    )  # fmt: skip
    run_dir = prepare_run_dir(cfg)
    before = eval_fn(start.model) if eval_fn is not None else {}
    result = train_loop(
        start.model, cfg, supervised(loss_fn, batches),
        eval_fn=eval_fn, wrt=start.wrt or nnx.Param, name="dpo",
    )  # fmt: skip
    metrics = {**result.metrics, **{f"eval/{k}": v for k, v in result.eval_metrics.items()}}
    path = save_for_task(task, start, run_dir, trained_by=f"dpo:{task.name}", metrics=metrics)
    return PreferenceResult(
        metrics=result.metrics, heldout_before=before, heldout_after=result.eval_metrics,
        checkpoint=path, run_dir=run_dir, reference_cache_hit=False, train=result,
    )  # fmt: skip
