"""Built-in plugin of the router product: the `router` task, the routing rewards
(`intent_accuracy`, `plan_validity`; see `router.rewards`) and the classes a router
checkpoint's `bundle.json` names (the engine's decoder LM and its config)."""

from __future__ import annotations

from collections.abc import Callable

from studio_align.hookspecs import hookimpl
from studio_align.models.conditioned import ConditionedConfig, EncoderConditionedLM
from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer
from studio_align.router.rewards import intent_accuracy, plan_validity
from studio_align.tasks import TaskSpec


@hookimpl
def studio_align_register_rewards(register: Callable[..., None]) -> None:
    register(intent_accuracy)
    register(plan_validity)


@hookimpl
def studio_align_register_tasks(register: Callable[..., None]) -> None:
    register(
        TaskSpec(
            "router",
            "studio_align.router.task:RouterTask",  # imported when the task is built
            "intent router: request -> plan of engine calls (sft, dpo, kto, grpo)",
        )
    )


@hookimpl
def studio_align_register_bundle_classes(register: Callable[..., None]) -> None:
    register(Transformer, ModelConfig)  # router checkpoints (and every token task's) are these
    register(EncoderConditionedLM, ConditionedConfig)  # routers on a pretrained encoder
