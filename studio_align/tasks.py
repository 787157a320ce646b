"""Tasks: what the engine trains, registered through `studio_align_register_tasks`.

The engine (`training`, `generation`) knows no product. A *task* is the product side of a
run: it turns records into what a generic trainer consumes, builds the model it trains
(and the frozen reference), evaluates it, and saves what a product serves. The router
(`router`), the grading vertical and any third-party model are tasks; the trainers take
one, as optax takes a transformation, and never import it.

Design choices:
- A task is a plain object satisfying `Task` (structural typing): no base class to
  inherit, so a plugin needs nothing but this module's names.
- Algorithms are opt-in per task: `algorithms` names what the task supports (`sft`,
  `dpo`, `kto`, `grpo`), and a trainer asks only for the methods its algorithm needs.
  A task that supports `sft` implements `sft_pairs`; `dpo` implements `preference_pairs`
  (token ids) or `dpo_objective` (a model that is not token-based, e.g. Diffusion-DPO);
  `kto` implements `kto_samples`; `grpo` implements `grpo_prompts` and `policy` (PPO
  too, when the policy has `features` for a value head); `distill` implements
  `distill_examples`, `distill_teacher` and `policy`.
- Sequences are token-id lists: the generic SFT/DPO/KTO trainers pack them
  (`training.packing`). GRPO needs only the task's `Policy` (sample + log-probs), so a
  continuous policy (the grading vertical) trains through the same trainer.
- `record_kinds` maps an algorithm to the compiled record kind its data comes from
  (`data compile` writes one JSONL per kind), so `[data] dir = ...` works for every task.
- A task with a `catalog` attribute (a `catalog.Catalog`, as the router has) gets every
  record's plan steps checked against it as its data is read, so an unknown step is
  refused with its file and line.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

Pair = tuple[Sequence[int], Sequence[int]]
ALGORITHMS = ("sft", "dpo", "kto", "grpo", "distill")


@dataclass
class StartingPoint:
    """A task's model ready to train: the trainable model, the frozen reference, what to
    differentiate (`nnx.Param`, or `nnx.LoRAParam` for adapters only) and task state
    that travels with the model (tokenizer, catalog, ...), passed back to the task."""

    model: Any
    reference: Any = None
    wrt: Any = None  # None: every nnx.Param
    tokenizer: Any = None
    state: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Task(Protocol):
    """What a trainable task provides (see the module docstring for which method when)."""

    name: str
    algorithms: frozenset[str]
    record_kinds: Mapping[str, str]

    def start(
        self,
        model: Any,
        *,
        seed: int,
        records: Sequence[Mapping[str, Any]] = (),
        reference: bool = True,
    ) -> StartingPoint:
        """The model to train from the run's `[model]` section (a pydantic model with
        `init_from`, `base`, `reference`, `lora`, `preset`, `config`, `options`).

        `records` are the training records (SFT from scratch builds its tokenizer on them);
        `reference=False` says no frozen reference is needed (GRPO and PPO without a KL
        term, SFT), so the task need not build one.
        """
        ...

    def evaluate(
        self, start: StartingPoint, records: Sequence[Mapping[str, Any]]
    ) -> dict[str, float]:
        """Held-out figures of `start.model` on `records` (higher is better unless named
        `loss`)."""
        ...

    def save(
        self, start: StartingPoint, path: Path, *, trained_by: str, metrics: Mapping[str, float]
    ) -> Path:
        """Write what the product loads (`eval`, `serve`) to `path`; returns it."""
        ...


class SupportsSFT(Protocol):
    def sft_pairs(self, start: StartingPoint, records: Sequence[Mapping[str, Any]]) -> list[Pair]:
        """(prompt ids, completion ids) per record; the loss covers the completion only."""
        ...


class SupportsDPO(Protocol):
    def preference_pairs(
        self, start: StartingPoint, records: Sequence[Mapping[str, Any]]
    ) -> tuple[list[Sequence[int]], list[Sequence[int]], list[Sequence[int]]]:
        """(prompts, chosen completions, rejected completions), as token ids."""
        ...


class SupportsObjectiveDPO(Protocol):
    """`dpo` for a model that is not a token sequence (an image generator): the task gives
    the shared loop its step-indexed batches and its `(loss, metrics)` function (e.g.
    Diffusion-DPO against `start.reference`) instead of token-id pairs."""

    def dpo_objective(
        self,
        start: StartingPoint,
        records: Sequence[Mapping[str, Any]],
        dpo: Any,
        *,
        batch_size: int,
        seed: int,
        heldout: Sequence[Mapping[str, Any]] = (),
    ) -> tuple[Callable[[int], Any], Callable[..., Any], Callable[[Any], dict[str, float]] | None]:
        """(batches(step), loss_fn(model, batch), held-out eval_fn(model) or None)."""
        ...


class SupportsKTO(Protocol):
    def kto_samples(
        self, start: StartingPoint, records: Sequence[Mapping[str, Any]]
    ) -> tuple[list[Sequence[int]], list[Sequence[int]], list[bool]]:
        """(prompts, completions, desirable) for unpaired samples."""
        ...


class SupportsGRPO(Protocol):
    def grpo_prompts(
        self, start: StartingPoint, records: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        """One dict per prompt: `prompt` (what the policy samples from) plus reward columns
        (`requests`, `gold_plans`, `images`, ...), which rewards receive by name."""
        ...

    def policy(self, start: StartingPoint, sampling: Any, *, max_prompt_len: int) -> Any:
        """A `training.policy.Policy` (sample + log-probs) for `start.model`."""
        ...

    def reward_context(self, start: StartingPoint) -> dict[str, Any]:
        """Batch-wide values offered to rewards (e.g. the router's catalog)."""
        ...


class Teacher(Protocol):
    """What a distillation student learns from: token distributions for completions."""

    def distributions(
        self, examples: Sequence[Mapping[str, Any]], completions: Sequence[Sequence[int]],
        width: int,
    ) -> tuple[Any, Any]:  # fmt: skip
        """`(ids [N, width, K] int32, logps [N, width, K] float32)`: at each completion
        position the K candidate token ids (the student's vocabulary) and the teacher's
        log-probs of them (-1e30 for padding candidates); positions past a completion's
        end are ignored."""
        ...


class SupportsDistill(Protocol):
    def distill_examples(
        self, start: StartingPoint, records: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        """One dict per example: `prompt` and `completion` (student token ids) plus what
        the teacher reads (e.g. `requests`)."""
        ...

    def distill_teacher(self, start: StartingPoint, path: Any) -> Teacher:
        """The teacher at `path` (a checkpoint the task knows), speaking the student's ids."""
        ...


@dataclass(frozen=True)
class TaskSpec:
    """A registered task, built on first use.

    `factory` is a callable returning the task, or a `"module:attribute"` reference
    (as an entry point is written), imported only when the task is built: registering a
    task must not import its model code, so `studio-align plugins list` and every other
    command start fast.
    """

    name: str
    factory: Callable[[], Any] | str
    description: str = ""
    plugin: str | None = None

    def build(self) -> Any:
        factory = self.factory
        if isinstance(factory, str):
            module, _, attr = factory.partition(":")
            factory = getattr(importlib.import_module(module), attr)
        return factory()


def supports(task: Any, algorithm: str) -> bool:
    """Whether `task` declares `algorithm` in its `algorithms`."""
    return algorithm in getattr(task, "algorithms", ())
