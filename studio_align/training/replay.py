"""Replay: the task's own labelled (SFT) records rehearsed beside a preference objective.

Why: preference tuning on creators' logs moves the router away from its labels even where
creators and labels agree (the quickstart's final router forgot 4.5 points on
hand-written validation requests without it; docs/experiments/router-sft-replay-during-dpo.md). RPO's NLL on the *chosen* completions keeps the
creators' plans likely, not the labels; replay adds `alpha * NLL` of the SFT objective
itself, on the records SFT trained on, so label accuracy is rehearsed while preferences
are learned (rehearsal against catastrophic forgetting; cf. the "PPO-ptx" pretraining mix
of InstructGPT, Ouyang et al. 2022).

Design choices:
- The records are the task's own SFT records (`Task.sft_pairs`, its `record_kinds["sft"]`
  kind), packed once by `packing.pack_completions` with the `replay_` prefix, so the engine
  needs nothing product-specific.
- Each step's batch carries one replay batch of `batch_size` records, packed end to end
  into rows (`training/packed.py`: the same NLL on about a third of the tokens; the
  records are padded to the longest, 96 tokens against a median of 25 on the quickstart's
  routing data) as `replay_tokens/attn/loss/positions/segments`, drawn from its own
  shuffled stream: replay epochs are independent of pair epochs, and the batch of step
  `s` still depends only on `(seed, s)` (exact resume).
- The term is the SFT loss (token-weighted mean NLL over completion tokens), so `alpha`
  weighs DPO against exactly what SFT minimised.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from studio_align.data.records import read_record_file
from studio_align.errors import ConfigError, DataError
from studio_align.models.logprobs import gather_logps
from studio_align.tasks import StartingPoint, supports
from studio_align.training.batches import ArrayBatches, BatchSource, HostBatch
from studio_align.training.packed import PackedBatches, batch_logits
from studio_align.training.packing import pack_completions

PREFIX = "replay_"


def replay_records(
    task: Any,
    alpha: float,
    records: Sequence[Mapping[str, Any]] | None,
    path: Path | None,
    *,
    key: str = "dpo.replay_data",
) -> Sequence[Mapping[str, Any]] | None:
    """The records to replay (`records` win over the JSONL at `path`), or None when off.

    `alpha > 0` without records, or for a task without SFT, is a one-line config error."""
    if alpha <= 0:
        return None
    name = getattr(task, "name", type(task).__name__)
    if not supports(task, "sft") or not hasattr(task, "sft_pairs"):
        raise ConfigError(f"{key}: task {name!r} has no SFT records to replay (no sft_pairs)")
    if hasattr(task, "dpo_objective"):
        raise ConfigError(f"{key}: task {name!r} trains its own objective, not token sequences")
    if records is None:
        if path is None:
            kind = task.record_kinds["sft"]
            raise ConfigError(f"{key}: replay is on but no records given (a JSONL of {kind})")
        records = read_record_file(path, task.record_kinds["sft"])
    if not records:
        raise DataError(f"{key}: no records to replay")
    return records


def pack_replay(
    task: Any, start: StartingPoint, records: Sequence[Mapping[str, Any]], *, pad_id: int
) -> dict[str, np.ndarray]:
    """`replay_tokens/attn/loss [N, L]` of the task's SFT pairs, L their own longest."""
    pairs = task.sft_pairs(start, records)
    prompts, completions = [p for p, _ in pairs], [c for _, c in pairs]
    return pack_completions(prompts, completions, pad_id=pad_id, prefix=PREFIX)


class ReplayBatches:
    """`source`'s batches plus one replay batch each step, cycled on the replay's own epochs.

    `steps_per_epoch` is the source's (an epoch is still one pass over the pairs). Fewer
    records than a batch are repeated to fill it (a small labelled set still replays)."""

    def __init__(
        self,
        source: BatchSource,
        replay: Mapping[str, np.ndarray],
        batch_size: int,
        seed: int,
        *,
        groups: int = 1,
    ):
        n = len(next(iter(replay.values()), ()))
        if 0 < n < batch_size:
            replay = {k: np.concatenate([v] * -(-batch_size // n)) for k, v in replay.items()}
        self.source = source
        length = replay[f"{PREFIX}tokens"].shape[1]
        rows = math.lcm(2, jax.device_count())  # every micro-batch splits over the mesh
        self.replay = PackedBatches(ArrayBatches(replay, batch_size, seed=seed), length,
                                    rows_multiple=rows, groups=groups, prefix=PREFIX)  # fmt: skip
        self.steps_per_epoch = getattr(source, "steps_per_epoch", None)

    def __call__(self, step: int) -> HostBatch:
        return {**self.source(step), **self.replay(step)}


def with_replay(
    source: BatchSource,
    task: Any,
    start: StartingPoint,
    records: Sequence[Mapping[str, Any]] | None,
    *,
    batch_size: int,
    seed: int,
    pad_id: int,
    groups: int = 1,
) -> BatchSource:
    """`source` itself when `records` is None (replay off), else a `ReplayBatches`
    (`groups`: the run's gradient-accumulation micro-batches)."""
    if records is None:
        return source
    replay = pack_replay(task, start, records, pad_id=pad_id)
    return ReplayBatches(source, replay, batch_size, seed, groups=groups)


def replay_nll(model: Any, batch: Mapping[str, jax.Array]) -> jax.Array:
    """SFT's loss on the replay batch: mean NLL over its completion tokens."""
    tokens = batch[f"{PREFIX}tokens"]
    lp = gather_logps(batch_logits(model, batch, PREFIX)[:, :-1], tokens[:, 1:])
    m = batch[f"{PREFIX}loss"][:, 1:].astype(lp.dtype)
    return -jnp.sum(lp * m) / jnp.maximum(jnp.sum(m), 1.0)
