"""Built-in plugin of `intents`: the `router` task and the routing rewards
(`intent_accuracy`, `plan_validity`; see `intents.rewards`)."""

from __future__ import annotations

from collections.abc import Callable

from studio_align.hookspecs import hookimpl
from studio_align.intents.rewards import intent_accuracy, plan_validity
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
            "studio_align.intents.task:RouterTask",  # imported when the task is built
            "intent router: request -> plan of engine calls (sft, dpo, kto, grpo)",
        )
    )
