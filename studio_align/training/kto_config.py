"""`studio-align train kto`'s run config: pydantic only, no JAX, so `config show` and `--help` are cheap."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from studio_align.config import Strict
from studio_align.training.run_config import ModelSection, RecordsSection, TrainRunConfig


class KTOConfig(Strict):
    """`[kto]`: the KTO objective."""

    beta: float = Field(default=0.1, gt=0)
    desirable_weight: float | None = Field(default=None, gt=0)  # None: balanced from the data
    undesirable_weight: float = Field(default=1.0, gt=0)
    ref_batch_size: int = Field(default=32, ge=1)
    cache_dir: Path | None = None  # default: RUN_DIR/ref_cache


class KTORunConfig(TrainRunConfig):
    """The run config of `studio-align train kto` (any task with unpaired outcomes)."""

    task: str = "router"
    model: ModelSection = Field(default_factory=ModelSection)
    data: RecordsSection = Field(default_factory=RecordsSection)
    kto: KTOConfig = Field(default_factory=KTOConfig)
