"""Sizes and steps of the quickstart loop; the router settings it extends are the router's."""

from __future__ import annotations

from pydantic import Field

from studio_align.router.settings import FromLogsConfig as FromLogsConfig
from studio_align.router.settings import PipelineResult as PipelineResult
from studio_align.router.settings import RouterSettings
from studio_align.router.settings import StageData as StageData
from studio_align.router.settings import StageResult as StageResult


class QuickstartConfig(RouterSettings):
    """Sizes and steps of the quickstart loop (defaults fit 2 CPU cores in minutes): the
    router settings plus the demo generator's sizes and the grading and flow switches."""

    n_train: int | None = None  # None: sft.steps * sft.batch_size, every example seen once
    n_val: int = 200
    n_heldout: int = 400
    n_creators: int = 40
    n_eval_creators: int = 12
    grading: bool = True  # also run the colour-grading vertical on platform-shaped files
    # also align the packaged flow generator to simulated creators; measured cost and the
    # choice of 8 steps: docs/experiments/flow-quickstart-stage-timing.md
    flow: bool = True
    flow_grpo_steps: int = Field(8, ge=1)
    # run the flow and grading verticals in a thread beside the router stages (they share
    # no files); False runs them first, alone, so each stage's seconds are its own
    concurrent: bool = True
