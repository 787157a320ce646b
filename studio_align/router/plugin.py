"""Built-in plugin of the router product: the `router` task, the routing rewards
(`intent_accuracy`, `plan_validity`; see `router.rewards`), the classes a router
checkpoint's `bundle.json` names (the engine's decoder LM, the encoder-conditioned decoder,
and their configs) and the
router's commands (`router.commands`).

Everything is registered by `"module:attribute"` reference and imported on first use,
so loading this plugin (every `studio-align` command does) imports no JAX.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from studio_align.hookspecs import hookimpl
from studio_align.tasks import TaskSpec

_COMMANDS = "studio_align.router.commands"


@hookimpl
def studio_align_register_rewards(register: Callable[..., None]) -> None:
    register("studio_align.router.rewards:intent_accuracy")
    register("studio_align.router.rewards:plan_validity")


@hookimpl
def studio_align_register_tasks(register: Callable[..., None]) -> None:
    register(
        TaskSpec(
            "router",
            "studio_align.router.task:RouterTask",
            "intent router: request -> plan of engine calls (sft, dpo, kto, grpo)",
        )
    )


@hookimpl
def studio_align_register_bundle_classes(register: Callable[..., None]) -> None:
    # router checkpoints (and every token task's) are the engine's decoder LM
    register(
        "studio_align.models.transformer:Transformer", "studio_align.models.config:ModelConfig"
    )
    # routers on a pretrained encoder (`[model] options.encoder`)
    register(
        "studio_align.models.conditioned:EncoderConditionedLM",
        "studio_align.models.conditioned:ConditionedConfig",
    )


@hookimpl
def studio_align_register_commands(cli: Any) -> None:
    cli.lazy("train router", f"{_COMMANDS}:train_router", "Train a router from creator logs.")
    cli.lazy(
        "eval router", f"{_COMMANDS}:eval_router", "Score a router checkpoint on labelled requests."
    )
    cli.lazy(
        "model ensemble-router", f"{_COMMANDS}:ensemble_router", "Combine routers into an ensemble."
    )
    cli.lazy(
        "model calibrate-router", f"{_COMMANDS}:calibrate_router",
        "Fit a router's confidence and abstain thresholds on validation.",
    )  # fmt: skip
    cli.lazy(
        "model fit-prior", f"{_COMMANDS}:fit_prior_command",
        "Fit a router's plan prior for requests longer than it reads.",
    )  # fmt: skip
