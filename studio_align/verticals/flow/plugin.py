"""Built-in plugin of the flow vertical: task `flow`, encoder `flow-composition`, rewards
`flow_diversity` and `flow_anchor`, commands `train flow`, `eval flow` and `generate`.

- `flow`: `verticals.flow.task.FlowTask` (built on first use).
- `flow-composition`: colour statistics + key and subject-position statistics
  (`verticals.flow.composition.CompositionEncoder`); `train reward` with this encoder learns
  where a creator wants the subject, not only the colours.
- `flow_diversity`, `flow_anchor`: see `verticals.flow.rewards` and `verticals.flow.guards`.

Everything is registered by `"module:attribute"` reference and imported on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from studio_align.hookspecs import EncoderSpec, hookimpl
from studio_align.tasks import TaskSpec

_COMMANDS = "studio_align.verticals.flow.commands"


@hookimpl
def studio_align_register_tasks(register: Callable[..., None]) -> None:
    register(
        TaskSpec(
            "flow",
            "studio_align.verticals.flow.task:FlowTask",
            "rectified-flow image generator (Flow-GRPO, Diffusion-DPO)",
        )
    )


@hookimpl
def studio_align_register_encoders(register: Callable[..., None]) -> None:
    register(
        EncoderSpec(
            "flow-composition",
            "studio_align.verticals.flow.composition:CompositionEncoder",
            "colour statistics + key and subject position (numpy)",
        )
    )


@hookimpl
def studio_align_register_rewards(register: Callable[..., None]) -> None:
    register("studio_align.verticals.flow.rewards:flow_diversity")
    register("studio_align.verticals.flow.guards:flow_anchor")


@hookimpl
def studio_align_register_commands(cli: Any) -> None:
    cli.lazy("train flow", f"{_COMMANDS}:train_flow", "Pretrain the rectified-flow generator.")
    cli.lazy("eval flow", f"{_COMMANDS}:eval_flow", "Score an aligned flow model per creator.")
    cli.lazy("generate", f"{_COMMANDS}:generate_cmd", "Sample images for a tag set.")
