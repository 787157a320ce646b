"""Supervised fine-tuning: next-token loss on the completion only, for any task.

`train_sft(cfg)` trains the task named by `cfg.task` (the router by default) on its
labelled records: the task turns each record into `(prompt ids, completion ids)`
(`Task.sft_pairs`), and the loss is the mean negative log-likelihood over completion
tokens; prompt and padding tokens carry no loss.

Design choices:
- Sequences are packed by `training.packing` (the same module the preference trainers
  use), right-padded to the longest example (rounded up to a multiple of 8, unless
  `data.max_len` says otherwise); each batch is then cut to its own longest row, rounded
  up to `data.bucket` tokens (`TrimmedBatches`): a few compiles, far fewer padding tokens.
- The loss reports its token count as `metrics["weight"]`, which makes gradient
  accumulation exact for this token-weighted mean (see `accumulate.py`).
- What is saved is the task's: for the router, a model bundle plus `router.json` at
  `RUN_DIR/model`, the directory `eval router` and `serve router` take.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.errors import DataError
from studio_align.models.logprobs import gather_logps
from studio_align.tasks import Pair
from studio_align.training.batches import ArrayBatches, BatchSource, TrimmedBatches
from studio_align.training.distributed import maybe_initialize
from studio_align.training.loop import TrainResult, train_loop
from studio_align.training.packed import PackedBatches, batch_logits
from studio_align.training.packing import pack_completions
from studio_align.training.run import (
    prepare_run_dir,
    read_split,
    resolve_task,
    save_for_task,
)
from studio_align.training.sft_config import SFTConfig as SFTConfig
from studio_align.training.sft_config import SFTRecords as SFTRecords
from studio_align.training.supervised import supervised


@dataclass
class SFTResult:
    metrics: dict[str, float]  # last logged training window
    eval_metrics: dict[str, float]  # held-out loss / token accuracy / exact-completion rate
    heldout_before: dict[str, float]  # the same figures for the starting point
    checkpoint: Path  # what the task saved (the router checkpoint for the router)
    run_dir: Path
    train: TrainResult


# -- generic SFT --------------------------------------------------------------------------


def encode_pairs(pairs: Sequence[Pair], max_len: int | None, pad_id: int) -> dict[str, np.ndarray]:
    """Right-padded `tokens`, `attn` and `loss` (1 on completion tokens) arrays."""
    prompts, completions = [p for p, _ in pairs], [c for _, c in pairs]
    return pack_completions(prompts, completions, pad_id=pad_id, length=max_len)


def padded_length(pairs: Sequence[Pair], multiple: int = 8) -> int:
    """The longest prompt + completion, rounded up to `multiple` (one shape for all batches)."""
    longest = max(len(p) + len(c) for p, c in pairs)
    return -(-longest // multiple) * multiple


def _completion_stats(model: nnx.Module, batch: Mapping[str, jax.Array]):
    logits = batch_logits(model, batch)[:, :-1]  # plain or packed rows
    targets = batch["tokens"][:, 1:]
    mask = batch["loss"][:, 1:].astype(jnp.float32)
    nll = -gather_logps(logits, targets) * mask
    correct = (jnp.argmax(logits, -1) == targets).astype(jnp.float32) * mask
    return nll, correct, mask


def sft_loss(model: nnx.Module, batch: Mapping[str, jax.Array]) -> tuple[jax.Array, dict]:
    """Mean NLL over completion tokens (`loss_mask`), with token accuracy and the count."""
    nll, correct, mask = _completion_stats(model, batch)
    n = mask.sum()
    denom = jnp.maximum(n, 1.0)
    return nll.sum() / denom, {"token_acc": correct.sum() / denom, "weight": n}


def make_eval_fn(arrays: Mapping[str, np.ndarray], batch_size: int):
    """`eval_fn(model) -> {loss, token_acc, exact}` over every held-out example.

    The last batch is padded with zero-loss rows, so all batches share one shape (one
    compile). `exact` is the fraction of examples whose whole completion is the argmax
    under teacher forcing.
    """
    n = len(next(iter(arrays.values())))
    nb = -(-n // batch_size)
    padded = {}
    for k, a in arrays.items():
        extra = np.zeros((nb * batch_size - n, *a.shape[1:]), a.dtype)
        padded[k] = np.concatenate([a, extra]).reshape(nb, batch_size, *a.shape[1:])
    if "attn" in padded:  # keep padded rows attendable (one token) to avoid NaN rows
        padded["attn"][..., 0] = True

    @jax.jit
    def sums(graphdef: Any, state: Any, batch: Any) -> jax.Array:
        nll, correct, mask = _completion_stats(nnx.merge(graphdef, state), batch)
        seq_ok = (correct.sum(-1) == mask.sum(-1)) & (mask.sum(-1) > 0)
        return jnp.stack([nll.sum(), correct.sum(), mask.sum(), seq_ok.sum()])

    def eval_fn(model: nnx.Module) -> dict[str, float]:
        graphdef, state = nnx.split(model)
        tot = np.zeros(4)
        for i in range(nb):
            tot += np.asarray(sums(graphdef, state, {k: v[i] for k, v in padded.items()}))
        return {
            "loss": tot[0] / max(tot[2], 1),
            "token_acc": tot[1] / max(tot[2], 1),
            "exact": tot[3] / n,
        }

    return eval_fn


# -- the `train sft` run ---------------------------------------------------------------------


def train_sft(
    cfg: SFTConfig,
    *,
    task: Any = None,
    examples: Sequence[Mapping[str, Any]] | None = None,
    heldout: Sequence[Mapping[str, Any]] | None = None,
    tokenizer: Any | None = None,
) -> SFTResult:
    """Train `task` (default: the one `cfg.task` names) by SFT; returns metrics and what it saved.

    `examples` / `heldout` / `tokenizer` override what `cfg.data` and the task would supply
    (library callers such as quickstart pass them in memory).
    """
    maybe_initialize(cfg.distributed)
    task = resolve_task(task or cfg.task, "sft")
    if examples is None:
        examples = read_split(task, cfg.data, "sft", "train")
    if heldout is None:
        heldout = read_split(task, cfg.data, "sft", "heldout")
    if not examples:
        raise DataError("no training examples")
    options = {"tokenizer": tokenizer} if tokenizer is not None else {}
    start = task.start(cfg.model, seed=cfg.train.seed, records=examples, reference=False,
                       **options)  # fmt: skip
    pad_id = getattr(start.tokenizer, "pad_id", None)
    if pad_id is None:
        raise DataError("the tokenizer has no <pad> token; SFT batches need one")
    train_pairs = task.sft_pairs(start, examples)
    held_pairs = task.sft_pairs(start, heldout) if heldout else []
    max_len = cfg.data.max_len or padded_length([*train_pairs, *held_pairs])
    batches: BatchSource = ArrayBatches(
        encode_pairs(train_pairs, max_len, pad_id),
        cfg.train.batch_size,
        seed=cfg.train.seed,
        lengths=np.array([len(p) + len(c) for p, c in train_pairs]),
        group=cfg.data.group_by_length,
    )
    if cfg.data.pack:
        rows = math.lcm(2, jax.device_count())  # every micro-batch splits over the mesh
        batches = PackedBatches(batches, max_len, rows_multiple=rows, groups=cfg.train.grad_accum)
    elif cfg.data.bucket:
        batches = TrimmedBatches(batches, cfg.data.bucket)
    eval_fn = (
        make_eval_fn(encode_pairs(held_pairs, max_len, pad_id), cfg.data.eval_batch_size)
        if held_pairs
        else None
    )
    before = eval_fn(start.model) if eval_fn is not None else {}
    run_dir = prepare_run_dir(cfg)
    result = train_loop(
        start.model, cfg, supervised(sft_loss, batches), eval_fn=eval_fn,
        wrt=start.wrt or nnx.Param, name="sft",
    )  # fmt: skip
    metrics = {**result.metrics, **{f"eval/{k}": v for k, v in result.eval_metrics.items()}}
    path = save_for_task(task, start, run_dir, trained_by="sft", metrics=metrics)
    return SFTResult(
        metrics=result.metrics,
        eval_metrics=result.eval_metrics,
        heldout_before=before,
        checkpoint=path,
        run_dir=run_dir,
        train=result,
    )
