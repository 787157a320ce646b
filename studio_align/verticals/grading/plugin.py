"""Built-in plugin of the grading vertical: the `grading` task.

Declared in studio-align's own entry points (`grading = "studio_align.verticals.grading.plugin"`
under `[project.entry-points.studio_align]`), exactly as a third party's would be, so the
plugin host never imports the vertical. The rewards GRPO uses here (`aesthetic`,
`identity`) are the reward models' plugin's; the task needs none of its own.
"""

from __future__ import annotations

from typing import Any

from studio_align.hookspecs import hookimpl
from studio_align.tasks import TaskSpec


@hookimpl
def studio_align_register_tasks(register: Any) -> None:
    register(
        TaskSpec(
            "grading",
            "studio_align.verticals.grading.task:GradingTask",  # imported when built
            "film colour grading from retouch, selection and rating logs; exports .cube LUTs",
        )
    )
