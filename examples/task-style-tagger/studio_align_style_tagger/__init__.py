"""studio-align task plugin: tag a prompt with the visual style it asks for.

Registered through `studio_align_register_tasks` under the name `style-tagger`; the
generic SFT trainer (`studio-align train sft`, `task = "style-tagger"`) trains it.
"""

from __future__ import annotations

from collections.abc import Callable

from studio_align.hookspecs import hookimpl
from studio_align.tasks import TaskSpec
from studio_align_style_tagger.task import StyleTaggerTask

__all__ = ["StyleTaggerTask", "studio_align_register_tasks"]


@hookimpl
def studio_align_register_tasks(register: Callable[..., None]) -> None:
    register(TaskSpec("style-tagger", StyleTaggerTask, "prompt -> visual style tag (sft)"))
