"""studio-align task plugin: tag a prompt with the visual style it asks for.

Registers, by reference (imported on first use, so `studio-align --help` stays fast):

- the task `style-tagger` (`task.StyleTaggerTask`), which the generic SFT trainer
  trains (`studio-align train sft`, `task = "style-tagger"`);
- the command `studio-align data demo-style-tagger --out DIR` (`commands.demo`), which
  writes demo data and the run config for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from studio_align.hookspecs import hookimpl
from studio_align.tasks import TaskSpec

__all__ = ["studio_align_register_commands", "studio_align_register_tasks"]


@hookimpl
def studio_align_register_tasks(register: Callable[..., None]) -> None:
    register(
        TaskSpec(
            "style-tagger",
            "studio_align_style_tagger.task:StyleTaggerTask",
            "prompt -> visual style tag (sft)",
        )
    )


@hookimpl
def studio_align_register_commands(cli: Any) -> None:
    cli.lazy(
        "data demo-style-tagger",
        "studio_align_style_tagger.commands:demo",
        "Write style-tagging demo data and its SFT run config.",
    )
