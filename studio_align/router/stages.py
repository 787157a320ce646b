"""The router stages of the quickstart, each built from the real run config a user would
write (`train sft|dpo|kto|grpo --config`), saved as `stages/<stage>/config.toml`.

Each run config (`sft_run_config`, `dpo_run_config`, ...) is assembled from typed pieces: the stage's own table of `RouterSettings`
(its steps, its `[optim]`, and for DPO, KTO and GRPO the objective's section itself), the
shared settings (seed, batch size, model) and what the pipeline fixes (where it runs, what
it starts from, the compiled logs, the final checkpoint only). `train router --logs`
(`from_logs.py`) runs the same builders; its `StageData.base` (a Hugging Face directory)
starts a stage that has no router checkpoint to start from."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from studio_align.catalog import Catalog
from studio_align.errors import ConfigError
from studio_align.models.interpolate import interpolate_bundles
from studio_align.router.data import write_jsonl
from studio_align.router.settings import RouterSettings, StageData
from studio_align.router.task import RouterTask
from studio_align.training.dpo import train_dpo
from studio_align.training.dpo_config import DPOConfig, DPORunConfig
from studio_align.training.grpo_config import GRPOConfig
from studio_align.training.grpo_run import train_grpo
from studio_align.training.grpo_run_config import GRPORunConfig, GRPOTrainConfig
from studio_align.training.kto import train_kto
from studio_align.training.kto_config import KTOConfig, KTORunConfig
from studio_align.training.run_config import (
    CheckpointConfig,
    ModelSection,
    OptimConfig,
    RecordsSection,
    TrainConfig,
)
from studio_align.training.sft import train_sft
from studio_align.training.sft_config import SFTConfig

S = TypeVar("S", bound=BaseModel)


def _section(value: BaseModel, cls: type[S]) -> S:
    """The fields of `value` that `cls` has, as a `cls`: a stage's table (which extends a run
    config's section with the stage's steps and optimizer) as that section itself."""
    return cls.model_validate(value.model_dump(include=set(cls.model_fields)))


def _train(cfg: RouterSettings, steps: int, batch_size: int | None = None) -> TrainConfig:
    batch = cfg.batch_size if batch_size is None else batch_size
    return TrainConfig(steps=steps, batch_size=batch, seed=cfg.seed, log_every=20)


def _final_only() -> CheckpointConfig:
    """A stage keeps its final model only: no periodic checkpoints, no resume."""
    return CheckpointConfig(every=0, resume=False, async_save=False)


def _records(data: StageData, stage: str) -> RecordsSection:
    if data.compiled is None:
        raise ConfigError(f"the {stage} stage needs compiled logs (StageData.compiled)")
    return RecordsSection(dir=data.compiled)


def mixed_with_sft(cfg: RouterSettings, sft: Path, tuned: Path) -> Path:
    """The router a preference stage delivers: its weights mixed back towards SFT's,
    `tuned_weight * tuned + (1 - tuned_weight) * sft` (WiSE-FT: keeps label accuracy where
    creators agree with the labels), written beside the trained one; the next stage still
    trains from the unmixed checkpoint. `tuned_weight = 1`: the trained one itself."""
    if cfg.tuned_weight >= 1.0:
        return tuned
    return interpolate_bundles(sft, tuned, weight=cfg.tuned_weight, out=tuned.parent / "mixed")


def _start(start: Path | None, data: StageData, train_encoder: bool = False) -> ModelSection:
    """`[model]` for a stage continuing `start`, else from the Hugging Face `data.base`.

    Only SFT fine-tunes the encoder (`train_encoder`): the preference stages move the plan
    distribution, not the reading of words, and a trainable encoder made DPO ~2.5x slower."""
    if start is not None:
        options = {"train_encoder": True} if train_encoder else {}
        return ModelSection(init_from=start, options=options)
    if data.base is not None:
        return ModelSection(base=data.base)
    raise ConfigError("no router checkpoint (init_from) or base model to start from")


def _sft_model(cfg: RouterSettings, data: StageData, start: Path | None) -> ModelSection:
    """SFT's `[model]`: a fresh router (on the encoder unless `encoder = "none"`) when there is
    nothing to start from, else the checkpoint or base it continues."""
    if start is not None or data.base is not None:
        return _start(start, data, cfg.train_encoder)
    options: dict[str, Any] = {}
    if cfg.encoder != "none":
        options = {
            "encoder": cfg.encoder,
            "train_encoder": cfg.train_encoder,
            "conditioning": cfg.conditioning,
        }
        if cfg.encoder_lora is not None:
            options["encoder_lora"] = cfg.encoder_lora.model_dump()
    return ModelSection(
        preset="router", config=dict(cfg.model), vocab_size=cfg.vocab_size, options=options
    )


def sft_run_config(
    out: Path, cfg: RouterSettings, data: StageData, start: Path | None
) -> SFTConfig:
    """The SFT stage's run config (`train sft --config` takes its `config.toml`)."""
    s = cfg.sft
    return SFTConfig(
        run_dir=out / "stages" / "sft",
        train=_train(cfg, s.steps, s.batch_size),
        optim=_section(s.optim, OptimConfig),
        checkpoint=_final_only(),
        model=_sft_model(cfg, data, start),
    )


def _replay(cfg: RouterSettings, data: StageData) -> list[dict[str, Any]] | None:
    """What DPO's replay rehearses: the SFT split (the generator's labels in the quickstart,
    the logs' labelled requests in `train router --logs`); none without labelled requests."""
    return (data.train or None) if cfg.dpo.replay_alpha > 0 else None


def dpo_run_config(
    out: Path, cfg: RouterSettings, data: StageData, start: Path | None
) -> DPORunConfig:
    """The DPO stage's run config; `replay_alpha` is 0 when there is nothing to replay."""
    s = cfg.dpo
    dpo = _section(s, DPOConfig)
    if _replay(cfg, data) is None:
        dpo.replay_alpha = 0.0
    return DPORunConfig(
        run_dir=out / "stages" / "dpo",
        train=_train(cfg, s.steps),
        optim=_section(s.optim, OptimConfig),
        checkpoint=_final_only(),
        model=_start(start, data),
        data=_records(data, "dpo"),
        dpo=dpo,
    )


def kto_run_config(
    out: Path, cfg: RouterSettings, data: StageData, start: Path | None
) -> KTORunConfig:
    """The KTO stage's run config."""
    s = cfg.kto
    return KTORunConfig(
        run_dir=out / "stages" / "kto",
        train=_train(cfg, s.steps),
        optim=_section(s.optim, OptimConfig),
        checkpoint=_final_only(),
        model=_start(start, data),
        data=_records(data, "kto"),
        kto=_section(s, KTOConfig),
    )


def grpo_run_config(
    out: Path, cfg: RouterSettings, data: StageData, start: Path | None
) -> GRPORunConfig:
    """The GRPO stage's run config: `train grpo`'s checkpoints and batch (a step is
    `grpo.prompts_per_step` x `grpo.group_size` completions), the router's two rewards."""
    s = cfg.grpo
    return GRPORunConfig(
        run_dir=out / "stages" / "grpo",
        train=GRPOTrainConfig(steps=s.steps, seed=cfg.seed),
        optim=_section(s.optim, OptimConfig),
        model=_start(start, data),
        data=_records(data, "grpo"),
        grpo=_section(s, GRPOConfig),
        rewards={"intent_accuracy": 1.0, "plan_validity": 0.5},
    )


def stage_sft(
    out: Path, cfg: RouterSettings, data: StageData, start: Path | None, catalog: Catalog
) -> Path:
    task = RouterTask(catalog, split_prob=cfg.sft.split_prob, split_seed=cfg.seed)
    rc = sft_run_config(out, cfg, data, start)
    return Path(train_sft(rc, task=task, examples=data.train, heldout=data.val).checkpoint)


def stage_dpo(
    out: Path, cfg: RouterSettings, data: StageData, start: Path | None, catalog: Catalog
) -> Path:
    rc = dpo_run_config(out, cfg, data, start)
    replay = _replay(cfg, data)
    if replay is not None:  # so the saved config.toml replays the same records on its own
        rc.dpo.replay_data = write_jsonl(out / "stages" / "dpo" / "replay_examples.jsonl", replay)
    return Path(train_dpo(rc, task=RouterTask(catalog), replay=replay).checkpoint)


def stage_kto(
    out: Path, cfg: RouterSettings, data: StageData, start: Path | None, catalog: Catalog
) -> Path:
    return Path(
        train_kto(kto_run_config(out, cfg, data, start), task=RouterTask(catalog)).checkpoint
    )


def stage_grpo(
    out: Path, cfg: RouterSettings, data: StageData, start: Path | None, catalog: Catalog
) -> Path:
    rc = grpo_run_config(out, cfg, data, start)
    return Path(train_grpo(rc, task=RouterTask(catalog)).checkpoint)


StageFn = Callable[[Path, RouterSettings, StageData, Path | None, Catalog], Path]

# name -> builder; each takes (out, cfg, data, starting checkpoint or None, catalog)
STAGES: dict[str, StageFn] = {
    "sft": stage_sft,
    "dpo": stage_dpo,
    "kto": stage_kto,
    "grpo": stage_grpo,
}


def stage_plan(cfg: RouterSettings) -> list[str]:
    """The router stages this config runs, in order."""
    plan = ["sft"]
    if cfg.preference in ("dpo", "dpo+kto"):
        plan.append("dpo")
    if cfg.preference in ("kto", "dpo+kto"):
        plan.append("kto")
    if cfg.grpo.steps > 0:
        plan.append("grpo")
    return plan
