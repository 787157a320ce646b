"""The router stages of the quickstart, each built from the real nested run config a user
would write (`train sft|dpo|kto|grpo --config`), saved as `stages/<stage>/config.toml`.

`train router --logs` (`from_logs.py`) runs the same builders; its `data` may also carry
`base` (a Hugging Face directory) for a stage that has no router checkpoint to start from."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from studio_align.catalog import Catalog
from studio_align.errors import ConfigError
from studio_align.models.interpolate import interpolate_bundles
from studio_align.router.settings import RouterSettings
from studio_align.router.task import RouterTask
from studio_align.training.dpo import DPORunConfig, train_dpo
from studio_align.training.grpo_run import GRPORunConfig, train_grpo
from studio_align.training.kto import KTORunConfig, train_kto
from studio_align.training.sft import SFTConfig, train_sft


def _run_cfg(cfg: RouterSettings, run_dir: Path, steps: int, lr: float) -> dict[str, Any]:
    return {
        "run_dir": run_dir,
        "train": {"steps": steps, "batch_size": cfg.batch_size, "seed": cfg.seed, "log_every": 20},
        "optim": {"learning_rate": lr, "warmup_steps": min(20, steps // 10)},
        "checkpoint": {"every": 0, "resume": False, "async_save": False},
    }


def mixed_with_sft(cfg: RouterSettings, sft: Path, tuned: Path) -> Path:
    """The router a preference stage delivers: its weights mixed back towards SFT's,
    `tuned_weight * tuned + (1 - tuned_weight) * sft` (WiSE-FT: keeps label accuracy where
    creators agree with the labels), written beside the trained one; the next stage still
    trains from the unmixed checkpoint. `tuned_weight = 1`: the trained one itself."""
    if cfg.tuned_weight >= 1.0:
        return tuned
    return interpolate_bundles(sft, tuned, weight=cfg.tuned_weight, out=tuned.parent / "mixed")


def _start(
    start: Path | None, data: dict[str, Any], cfg: RouterSettings | None = None
) -> dict[str, Any]:
    """`[model]` for a stage continuing `start`, else from the Hugging Face `data["base"]`."""
    if start is not None:
        if cfg is not None and cfg.train_encoder:
            return {"init_from": start, "options": {"train_encoder": True}}
        return {"init_from": start}
    if data.get("base") is not None:
        return {"base": data["base"]}
    raise ConfigError("no router checkpoint (init_from) or base model to start from")


def stage_sft(
    out: Path, cfg: RouterSettings, data: dict[str, Any], start: Path | None, catalog: Catalog
) -> Path:
    fresh: dict[str, Any] = {"preset": "router", "config": cfg.model, "vocab_size": cfg.vocab_size}
    if cfg.encoder != "none":
        fresh["options"] = {"encoder": cfg.encoder, "train_encoder": cfg.train_encoder}
    model = fresh if start is None and data.get("base") is None else _start(start, data)
    run = _run_cfg(cfg, out / "stages" / "sft", cfg.sft_steps, cfg.sft_lr)
    run["optim"]["ema_decay"] = cfg.sft_ema_decay
    sc = SFTConfig.model_validate({**run, "model": model})
    res = train_sft(
        sc,
        task=RouterTask(catalog, split_prob=cfg.sft_split_prob, split_seed=cfg.seed),
        examples=data["splits"]["train"],
        heldout=data["splits"]["val"],
    )
    return Path(res.checkpoint)


def stage_dpo(
    out: Path, cfg: RouterSettings, data: dict[str, Any], start: Path | None, catalog: Catalog
) -> Path:
    # replay rehearses the SFT split: the generator's labels (quickstart), the logs' labelled
    # requests (`train router --logs`); none (a run without labelled requests): no replay
    replay = (data.get("splits", {}).get("train") or None) if cfg.dpo_replay_alpha > 0 else None
    rc = DPORunConfig.model_validate(
        {
            **_run_cfg(cfg, out / "stages" / "dpo", cfg.dpo_steps, cfg.dpo_lr),
            "model": _start(start, data, cfg),
            "data": {"dir": data["compiled"]},
            "dpo": {
                "beta": cfg.dpo_beta,
                "nll_alpha": cfg.dpo_nll_alpha,
                "replay_alpha": cfg.dpo_replay_alpha if replay else 0.0,
            },
        }
    )
    return Path(train_dpo(rc, task=RouterTask(catalog), replay=replay).checkpoint)


def stage_kto(
    out: Path, cfg: RouterSettings, data: dict[str, Any], start: Path | None, catalog: Catalog
) -> Path:
    rc = KTORunConfig.model_validate(
        {
            **_run_cfg(cfg, out / "stages" / "kto", cfg.kto_steps, cfg.kto_lr),
            "model": _start(start, data, cfg),
            "data": {"dir": data["compiled"]},
        }
    )
    return Path(train_kto(rc, task=RouterTask(catalog)).checkpoint)


def stage_grpo(
    out: Path, cfg: RouterSettings, data: dict[str, Any], start: Path | None, catalog: Catalog
) -> Path:
    rc = GRPORunConfig.model_validate(
        {
            "run_dir": out / "stages" / "grpo",
            "model": _start(start, data, cfg),
            "data": {"dir": data["compiled"]},
            "train": {"steps": cfg.grpo_steps, "seed": cfg.seed},
            "grpo": {
                "group_size": cfg.grpo_group,
                "prompts_per_step": cfg.grpo_prompts,
                "beta": cfg.grpo_beta,
            },
            "optim": {"learning_rate": cfg.grpo_lr, "decay": "constant"},
            "rewards": {"intent_accuracy": 1.0, "plan_validity": 0.5},
        }
    )
    return Path(train_grpo(rc, task=RouterTask(catalog)).checkpoint)


StageFn = Callable[[Path, RouterSettings, dict[str, Any], Any, Catalog], Path]

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
    if cfg.grpo_steps > 0:
        plan.append("grpo")
    return plan
