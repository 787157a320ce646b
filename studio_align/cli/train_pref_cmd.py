"""`studio-align train dpo|kto|grpo`: preference and RL tuning of the router.

Thin: each command loads its run config (TOML + `--set` overrides), calls the library
trainer and prints the figures. Library errors become exit code 2 in `cli/__init__`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from studio_align.commands import deferred, echo_result, load_run_config, run_config_options
from studio_align.training.dpo_config import DPORunConfig
from studio_align.training.grpo_run_config import GRPORunConfig
from studio_align.training.kto_config import KTORunConfig

train_dpo = deferred("studio_align.training.dpo:train_dpo")
train_grpo = deferred("studio_align.training.grpo_run:train_grpo")
train_kto = deferred("studio_align.training.kto:train_kto")


def _rounded(d: dict[str, Any]) -> dict[str, float]:
    """The figures of `d`, rounded (a metrics record's `run` name and `time` left out)."""
    return {k: round(float(v), 4) for k, v in d.items() if k not in ("run", "time")}


def _preference_summary(res: Any, **extra: Any) -> dict[str, Any]:
    """What a DPO or KTO run reports (both return the same result shape)."""
    return {
        "checkpoint": str(res.checkpoint),
        "run_dir": str(res.run_dir),
        "steps": res.train.step,
        "seconds": round(res.train.seconds, 2),
        "reference_cache_hit": res.reference_cache_hit,
        **extra,
        "train": _rounded(res.metrics),
        "heldout_before": _rounded(res.heldout_before),
        "heldout_after": _rounded(res.heldout_after),
    }


@click.command("dpo")
@run_config_options
def dpo(config: Path | None, overrides: tuple[str, ...], as_json: bool) -> None:
    """DPO-family tuning (sigmoid/cDPO, ipo, hinge, robust, simpo, orpo) on preference pairs."""

    res = train_dpo(load_run_config(DPORunConfig, config, overrides))
    echo_result(_preference_summary(res), as_json)


@click.command("kto")
@run_config_options
def kto(config: Path | None, overrides: tuple[str, ...], as_json: bool) -> None:
    """KTO tuning on unpaired route outcomes (accepted = desirable, abandoned = not)."""

    res = train_kto(load_run_config(KTORunConfig, config, overrides))
    echo_result(_preference_summary(res, desirable_weight=round(res.desirable_weight, 4)), as_json)


@click.command("grpo")
@run_config_options
def grpo(config: Path | None, overrides: tuple[str, ...], as_json: bool) -> None:
    """GRPO tuning with plugin rewards (`[rewards]` maps reward names to weights)."""

    res = train_grpo(load_run_config(GRPORunConfig, config, overrides))
    curve = [h.get("reward/total/mean", float("nan")) for h in res.history]
    echo_result(
        {
            "checkpoint": str(res.checkpoint),
            "run_dir": str(res.run_dir),
            "steps": len(res.history),
            "seconds": round(res.seconds, 2),
            "reward_start": round(curve[0], 4) if curve else None,
            "reward_end": round(curve[-1], 4) if curve else None,
            "last_step": _rounded(res.history[-1]) if res.history else {},
            "heldout_before": _rounded(res.heldout_before),
            "heldout_after": _rounded(res.heldout_after),
        },
        as_json,
    )
