"""`studio-align train dpo`'s run config: pydantic only, no JAX, so `config show` and `--help` are cheap."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from studio_align.config import Strict
from studio_align.training.run_config import ModelSection, RecordsSection, TrainRunConfig

DPOLossType = Literal["sigmoid", "ipo", "hinge", "robust", "simpo", "orpo"]


class DPOConfig(Strict):
    """`[dpo]`: the preference objective."""

    loss_type: DPOLossType = "sigmoid"
    beta: float = Field(default=0.1, gt=0)  # DPO beta / IPO tau / SimPO beta / ORPO lambda
    label_smoothing: float = Field(default=0.0, ge=0, lt=0.5)  # cDPO / robust DPO noise rate
    simpo_gamma: float = 0.5  # SimPO target margin
    # RPO (Pang et al. 2024): + nll_alpha * per-token NLL of the chosen completion, which
    # keeps the chosen plans likely instead of only widening the margin (0 = plain DPO)
    nll_alpha: float = Field(default=0.0, ge=0)
    # Replay (`replay.py`): + replay_alpha * SFT loss on the task's own labelled records, one
    # batch beside each pair batch, so label accuracy is rehearsed while preferences are
    # learned (0 = off). Records: `train_dpo(replay=...)`, else this JSONL (the task's SFT kind)
    replay_alpha: float = Field(default=0.0, ge=0)
    replay_data: Path | None = None
    ref_batch_size: int = Field(default=16, ge=1)  # pairs per reference call (= train batch)
    cache_dir: Path | None = None  # default: RUN_DIR/ref_cache


class DPORunConfig(TrainRunConfig):
    """The run config of `studio-align train dpo` (any task with preference pairs)."""

    task: str = "router"
    model: ModelSection = Field(default_factory=ModelSection)
    data: RecordsSection = Field(default_factory=RecordsSection)
    dpo: DPOConfig = Field(default_factory=DPOConfig)
