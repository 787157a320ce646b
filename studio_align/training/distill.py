"""`train distill`: a student learns a teacher's token distributions (GKD-style).

The teacher is chosen by `distill.teacher_kind` (`build_teacher`): `task` (the default)
is whatever the task builds from `distill.teacher` (`Task.distill_teacher`, a
`tasks.Teacher`): for the router a router checkpoint, a larger router, or an ensemble
directory; `policy` loads `distill.teacher` as the task loads `[model] init_from` and
scores it with the student's own policy (`PolicyTeacher`: any model of the student's
kind and tokenizer, its full constrained distribution). The student is the task's model from `[model]`, scored by the task's `Policy`
(`completion_logits`, the decoding constraint applied), and trained through the shared
`train_loop`.

Each step's batch is either
- off-policy: `train.batch_size` examples of the dataset (prompt + gold completion), in a
  per-epoch permutation, with the teacher's distributions computed once for the whole
  dataset and cached in `RUN_DIR/teacher_cache.npz` (keyed by the teacher path and the
  examples, so a resumed run or a rerun reuses it); or
- on-policy (with probability `on_policy_fraction`, GKD's lambda, drawn per step from
  `(seed, step)`): the student samples completions for that many prompts from its
  current weights (the loop hands the source the model) and the teacher scores them.

The loss is `algorithms.distill`'s forward KL, reverse KL or generalised JSD(beta), over
the teacher's K candidates per position, with both sides at `temperature` and the
student renormalised over the candidates (for the router these are exactly the tokens
the grammar allows). Every batch has the same shapes, so the step compiles once; every
choice is a function of `(seed, step)`, so a resumed run is the uninterrupted one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.algorithms.distill import NEG, distill_loss
from studio_align.errors import ConfigError
from studio_align.tasks import StartingPoint
from studio_align.training.distill_config import DistillConfig as DistillConfig
from studio_align.training.distill_config import DistillRunConfig as DistillRunConfig
from studio_align.training.distributed import maybe_initialize
from studio_align.training.loop import TrainResult, train_loop
from studio_align.training.policy import prompt_width
from studio_align.training.run import (
    prepare_run_dir,
    read_split,
    resolve_task,
    save_for_task,
)
from studio_align.training.supervised import supervised

CACHE_FILE = "teacher_cache.npz"


def _cache_key(
    teacher: Path, examples: Sequence[Mapping[str, Any]], width: int, kind: str = "task"
) -> str:
    """What the cached teacher outputs depend on: the teacher (path and kind), the width
    and the examples (the default kind's keys predate the kind)."""
    h = hashlib.sha256(str(Path(teacher).absolute()).encode())
    h.update(str(width).encode())
    if kind != "task":
        h.update(kind.encode())
    for e in examples:
        h.update(json.dumps([e["prompt"], e["completion"]]).encode())
    return h.hexdigest()


def teacher_outputs(
    teacher: Any, examples: Sequence[Mapping[str, Any]], width: int, *,
    cache: Path | None = None, key: str = "",
) -> tuple[np.ndarray, np.ndarray, bool]:  # fmt: skip
    """The teacher's `(ids, logps)` for the dataset's completions, from `cache` when it
    holds the same key; returns whether it was a cache hit."""
    if cache is not None and cache.is_file():
        with np.load(cache) as z:
            if str(z["key"]) == key:
                return z["ids"], z["logps"], True
    ids, logps = teacher.distributions(examples, [e["completion"] for e in examples], width)
    if cache is not None:
        tmp = cache.with_suffix(".tmp.npz")
        np.savez(tmp, ids=ids, logps=logps, key=np.asarray(key))
        tmp.replace(cache)
    return np.asarray(ids), np.asarray(logps), False


class DistillBatches:
    """The loop's batch source (module docstring); called as `source(step, model)`."""

    reads_model = True

    def __init__(
        self, policy: Any, teacher: Any, examples: Sequence[Mapping[str, Any]],
        teacher_ids: np.ndarray, teacher_logps: np.ndarray, *, batch_size: int, seed: int,
        on_policy_fraction: float,
    ) -> None:  # fmt: skip
        self.policy, self.teacher, self.examples = policy, teacher, list(examples)
        self.batch_size, self.seed, self.on_policy = batch_size, seed, on_policy_fraction
        self.n = len(self.examples)
        if batch_size > self.n:
            raise ConfigError(f"train.batch_size ({batch_size}) exceeds the {self.n} examples")
        self.steps_per_epoch = self.n // batch_size
        self.packed = policy.pack(
            [e["prompt"] for e in self.examples], [e["completion"] for e in self.examples]
        )
        self.t_ids, self.t_logps = teacher_ids, teacher_logps
        self.width = policy.max_new_tokens

    def is_on_policy(self, step: int) -> bool:
        return bool(np.random.default_rng([self.seed, step, 2]).random() < self.on_policy)

    def _rows(self, step: int) -> np.ndarray:
        epoch, k = divmod(step, self.steps_per_epoch)
        perm = np.random.default_rng([self.seed, epoch]).permutation(self.n)
        return perm[k * self.batch_size : (k + 1) * self.batch_size]

    def __call__(self, step: int, model: nnx.Module) -> dict[str, np.ndarray]:
        rows = self._rows(step)
        if not self.is_on_policy(step):
            out = {f"policy/{k}": v[rows] for k, v in self.packed.items()}
            return out | {"t_ids": self.t_ids[rows], "t_logps": self.t_logps[rows]}
        chosen = [self.examples[i] for i in rows]
        key = jax.random.fold_in(jax.random.key(self.seed), step)
        prompts = [e["prompt"] for e in chosen]
        comps = self.policy.sample(model, prompts, 1, key).columns["completions"]
        ids, logps = self.teacher.distributions(chosen, comps, self.width)
        # packed like the dataset's rows: the same shapes, so the step never recompiles
        out = {f"policy/{k}": v for k, v in self.policy.pack(prompts, comps).items()}
        return out | {"t_ids": np.asarray(ids), "t_logps": np.asarray(logps, np.float32)}


class PolicyTeacher:
    """Any model the student's policy can score (same tokenizer and constraint) as a
    teacher: its full, constrained next-token distribution (K = the vocabulary)."""

    def __init__(self, policy: Any, model: nnx.Module) -> None:
        self.policy = policy
        graphdef, state = nnx.split(model)
        fn = jax.jit(lambda st, b: policy.completion_logits(nnx.merge(graphdef, st), b)[0])
        self._logits = lambda b: fn(state, b)

    def distributions(
        self, examples: Sequence[Mapping[str, Any]], completions: Sequence[Sequence[int]],
        width: int,
    ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        batch = self.policy.pack([e["prompt"] for e in examples], completions)
        logps = np.asarray(jax.nn.log_softmax(self._logits(batch), axis=-1), np.float32)
        logps = np.maximum(logps, NEG)[:, :width]
        ids = np.broadcast_to(np.arange(logps.shape[-1], dtype=np.int32), logps.shape).copy()
        return ids, logps


def make_distill_loss(policy: Any, cfg: DistillConfig) -> Any:
    """`loss_fn(student, batch) -> (loss, metrics)`: the divergence over the teacher's K
    candidates at every completion position."""
    divergence = distill_loss(cfg.divergence, beta=cfg.beta)
    tau = cfg.temperature

    def loss_fn(model: nnx.Module, batch: Mapping[str, jax.Array]) -> tuple[jax.Array, dict]:
        pb = {k[len("policy/") :]: v for k, v in batch.items() if k.startswith("policy/")}
        logits, _ = policy.completion_logits(model, pb)  # [N, T, V], constrained
        mask = pb["completion_mask"]
        valid = batch["t_logps"] > NEG / 2
        s = jnp.take_along_axis(logits, batch["t_ids"], axis=-1) / tau
        s = jax.nn.log_softmax(jnp.where(valid, s, NEG), axis=-1)
        t = jax.nn.log_softmax(jnp.where(valid, batch["t_logps"] / tau, NEG), axis=-1)
        loss, metrics = divergence(jnp.where(valid, s, NEG), jnp.where(valid, t, NEG), mask)
        agree = jnp.argmax(s, -1) == jnp.argmax(t, -1)
        m = mask.astype(jnp.float32)
        metrics["top1_agreement"] = jnp.sum(agree * m) / jnp.maximum(m.sum(), 1.0)
        return loss, metrics

    return loss_fn


def build_teacher(
    task: Any, start: StartingPoint, policy: Any, cfg: DistillRunConfig,
    records: Sequence[Mapping[str, Any]],
) -> Any:  # fmt: skip
    """The `tasks.Teacher` that `distill.teacher_kind` names (see the module docstring)."""
    dc = cfg.distill
    if dc.teacher_kind == "task":
        return task.distill_teacher(start, dc.teacher)
    section = cfg.model.model_copy(update={"init_from": dc.teacher, "base": None, "lora": None})
    loaded = task.start(section, seed=cfg.train.seed, records=records, reference=False)
    want, got = (getattr(t, "vocab_size", None) for t in (start.tokenizer, loaded.tokenizer))
    if want != got:
        raise ConfigError(
            f"distill.teacher: {dc.teacher} has a tokenizer of {got} ids, the student's has "
            f'{want}; teacher_kind = "policy" scores the teacher with the student\'s tokenizer '
            '(teacher_kind = "task" maps other tokenizers, e.g. a router ensemble)'
        )
    return PolicyTeacher(policy, loaded.model)


@dataclass
class DistillRunResult:
    train: TrainResult
    heldout_before: dict[str, float]
    heldout_after: dict[str, float]
    checkpoint: Path
    run_dir: Path
    cache_hit: bool


def train_distill(
    cfg: DistillRunConfig, *, task: Any = None, start: StartingPoint | None = None
) -> DistillRunResult:
    """Distil `distill.teacher` into the task's student model (module docstring)."""
    maybe_initialize(cfg.distributed)
    task = resolve_task(task or cfg.task, "distill")
    dc = cfg.distill
    if dc.teacher is None:
        raise ConfigError("distill.teacher: set the teacher (router: a checkpoint or ensemble dir)")
    if not Path(dc.teacher).exists():
        raise ConfigError(f"distill.teacher: {dc.teacher} does not exist")
    train_records = read_split(task, cfg.data, "distill", "train")
    held_records = read_split(task, cfg.data, "distill", "heldout")
    start = start or task.start(cfg.model, seed=cfg.train.seed, records=train_records,
                                reference=False)  # fmt: skip
    examples = task.distill_examples(start, train_records)
    if not examples:
        raise ConfigError("data: no records to distil on")
    policy = task.policy(
        start, cfg.sampling, max_prompt_len=prompt_width(examples, cfg.data.max_len)
    )
    teacher = build_teacher(task, start, policy, cfg, train_records)
    run_dir = prepare_run_dir(cfg)
    width = policy.max_new_tokens
    cache = run_dir / CACHE_FILE if dc.cache_teacher else None
    ids, logps, hit = teacher_outputs(
        teacher,
        examples,
        width,
        cache=cache,
        key=_cache_key(dc.teacher, examples, width, dc.teacher_kind),
    )
    source = DistillBatches(
        policy, teacher, examples, ids, logps, batch_size=cfg.train.batch_size,
        seed=cfg.train.seed, on_policy_fraction=dc.on_policy_fraction,
    )  # fmt: skip
    before = task.evaluate(start, held_records) if held_records else {}
    result = train_loop(start.model, cfg, supervised(make_distill_loss(policy, dc), source),
                        wrt=start.wrt or nnx.Param, name="distill")  # fmt: skip
    after = task.evaluate(start, held_records) if held_records else {}
    metrics = {**result.metrics, **{f"eval/{k}": v for k, v in after.items()}}
    path = save_for_task(task, start, run_dir, trained_by="distill", metrics=metrics)
    return DistillRunResult(result, before, after, path, run_dir, hit)
