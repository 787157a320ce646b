"""`studio-align train reward`'s run config: pydantic only, no JAX, so `config show` and `--help` are cheap."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from studio_align.config import Strict
from studio_align.models.mesh_config import MeshConfig
from studio_align.training.run_config import (
    CheckpointConfig,
    DistributedConfig,
    TrainConfig,
    TrainRunConfig,
)


class EncoderConfig(Strict):
    name: str = "color-stats"
    options: dict[str, Any] = Field(default_factory=dict)
    cache_dir: str | None = None  # default: OUT/../embedding-cache
    max_side: int = Field(1024, ge=16)


class HeadConfig(Strict):
    hidden: int = Field(64, ge=0, description="0 = linear head")
    per_creator: bool = True


class FitSection(Strict):
    steps: int = Field(400, ge=1)
    learning_rate: float = Field(3e-3, gt=0)
    weight_decay: float = Field(1e-3, ge=0)
    batch_size: int = Field(512, ge=1)
    creator_l2: float = Field(1e-2, ge=0)
    ratings_loss: Literal["logistic", "kto"] = "logistic"


class GateConfig(Strict):
    min_heldout_accuracy: float = Field(0.6, ge=0.0, le=1.0)


class RewardTrainConfig(Strict):
    """`studio-align train reward` run config (TOML)."""

    logs: list[str]
    out: str
    quarantine: str | None = None
    skip_bad_images: bool = False
    seed: int = 0
    heldout_fraction: float = Field(0.2, ge=0.0, le=1.0)
    encoder: EncoderConfig = Field(default_factory=EncoderConfig)
    head: HeadConfig = Field(default_factory=HeadConfig)
    train: FitSection = Field(default_factory=FitSection)
    gate: GateConfig = Field(default_factory=GateConfig)
    ratings_weight: float = Field(1.0, ge=0, description="0 = ignore rating events")
    # the shared train state's sections: metrics.jsonl and orbax checkpoints in run_dir
    # (default OUT/run), resume as for every trainer, mesh and multi-host settings
    run_dir: str | None = None
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    mesh: MeshConfig = Field(default_factory=MeshConfig)
    distributed: DistributedConfig = Field(default_factory=DistributedConfig)
    progress: bool = True
    metrics_hook: bool = True

    def run_config(self) -> TrainRunConfig:
        """The train-loop sections of this config (`train`/`optim` come from `[train]`)."""
        return TrainRunConfig(
            run_dir=Path(self.run_dir or Path(self.out) / "run"),
            checkpoint=self.checkpoint,
            mesh=self.mesh,
            distributed=self.distributed,
            train=TrainConfig(progress=self.progress, metrics_hook=self.metrics_hook),
        )
