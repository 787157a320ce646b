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


def _grading_task() -> Any:
    from studio_align.verticals.grading.task import GradingTask  # built on first use (jax)

    return GradingTask()


@hookimpl
def studio_align_register_tasks(register: Any) -> None:
    register(
        TaskSpec(
            "grading",
            _grading_task,
            "film colour grading from retouch, selection and rating logs; exports .cube LUTs",
        )
    )
