"""Built-in plugin of the grading vertical: the `grading` task and its commands.

Declared in studio-align's own entry points (`grading = "studio_align.verticals.grading.plugin"`
under `[project.entry-points.studio_align]`), exactly as a third party's would be, so the
plugin host never imports the vertical. The rewards GRPO uses here (`aesthetic`,
`identity`) are the reward models' plugin's; the task needs none of its own. The task
and the commands (`verticals.grading.commands`) are registered by reference and
imported on first use.
"""

from __future__ import annotations

from typing import Any

from studio_align.hookspecs import hookimpl
from studio_align.tasks import TaskSpec

_COMMANDS = "studio_align.verticals.grading.commands"


@hookimpl
def studio_align_register_tasks(register: Any) -> None:
    register(
        TaskSpec(
            "grading",
            "studio_align.verticals.grading.task:GradingTask",
            "film colour grading from retouch, selection and rating logs; exports .cube LUTs",
        )
    )


@hookimpl
def studio_align_register_commands(cli: Any) -> None:
    cli.lazy("train grading", f"{_COMMANDS}:train_grading_cmd", "Train a grading model from logs.")
    cli.lazy("eval grading", f"{_COMMANDS}:eval_grading", "Score a grading model per creator.")
    cli.lazy("grade", f"{_COMMANDS}:grade", "Grade images with a trained grading model.")
