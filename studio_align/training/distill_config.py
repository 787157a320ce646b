"""`studio-align train distill`'s run config: pydantic only, no JAX, so `config show` and `--help` are cheap."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from studio_align.config import Strict
from studio_align.training.policy_run_config import SamplingSection
from studio_align.training.run_config import ModelSection, RecordsSection, TrainRunConfig


class DistillConfig(Strict):
    """`[distill]`: the teacher, the divergence and how often the student's own samples."""

    teacher: Path | None = None  # what the teacher is loaded from (see teacher_kind)
    # "task": the task's own teacher (router: a checkpoint, a larger router or an ensemble
    # dir, over the student's ids); "policy": a checkpoint of the student's kind, loaded as
    # the task loads `[model] init_from` and scored by the student's policy (same
    # tokenizer and constraint; its whole next-token distribution, K = the vocabulary)
    teacher_kind: Literal["task", "policy"] = "task"
    divergence: Literal["forward_kl", "reverse_kl", "jsd"] = "jsd"
    beta: float = Field(default=0.5, ge=0, le=1)  # jsd: 0 = forward KL, 1 = reverse KL
    temperature: float = Field(default=1.0, gt=0)
    on_policy_fraction: float = Field(default=0.0, ge=0, le=1)  # GKD's lambda
    cache_teacher: bool = True  # off-policy teacher outputs computed once, kept in RUN_DIR


class DistillRunConfig(TrainRunConfig):
    """The run config of `studio-align train distill`."""

    task: str = "router"
    run_dir: Path = Path("runs/distill")
    model: ModelSection = Field(default_factory=ModelSection)
    data: RecordsSection = Field(default_factory=RecordsSection)
    distill: DistillConfig = Field(default_factory=DistillConfig)
    sampling: SamplingSection = Field(default_factory=SamplingSection)
