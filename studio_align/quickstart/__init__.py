"""The quickstart: the whole loop on the embedded demo data, as a list of stages."""

from studio_align.quickstart.config import PipelineResult, QuickstartConfig, StageResult
from studio_align.quickstart.pipeline import run_quickstart

__all__ = ["PipelineResult", "QuickstartConfig", "StageResult", "run_quickstart"]
