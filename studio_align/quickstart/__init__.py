"""The quickstart: the whole loop on the embedded demo data, as a list of stages.

The package imports only its JAX-free settings (`config`), so reading a quickstart or
`train router --logs` config costs no JAX; the run is `quickstart.pipeline.run_quickstart`.
"""

from studio_align.quickstart.config import PipelineResult, QuickstartConfig, StageResult

__all__ = ["PipelineResult", "QuickstartConfig", "StageResult"]
