"""`studio-align train ppo|distill`: PPO with a learned critic, and distillation.

Thin: each command loads its run config (TOML + `--set` overrides), calls the library
trainer and prints the figures. Library errors become exit code 2 in `cli/__init__`.
"""

from __future__ import annotations

from pathlib import Path

import click

from studio_align.commands import deferred, echo_result, load_run_config, run_config_options
from studio_align.training.distill_config import DistillRunConfig
from studio_align.training.ppo_config import PPORunConfig

train_distill = deferred("studio_align.training.distill:train_distill")
train_ppo = deferred("studio_align.training.ppo:train_ppo")


def _rounded(d: dict[str, float]) -> dict[str, float]:
    return {k: round(float(v), 4) for k, v in d.items()}


@click.command("ppo")
@run_config_options
def ppo(config: Path | None, overrides: tuple[str, ...], as_json: bool) -> None:
    """PPO with a value head and GAE, plugin rewards (`[rewards]`), KL-shaped rewards."""

    res = train_ppo(load_run_config(PPORunConfig, config, overrides))
    curve = [h["reward/total/mean"] for h in res.history if "reward/total/mean" in h]
    echo_result(
        {
            "checkpoint": str(res.checkpoint),
            "run_dir": str(res.run_dir),
            "updates": res.train.step,
            "resumed_from": res.train.resumed_from,
            "reward_calls": res.reward_calls,
            "seconds": round(res.train.seconds, 2),
            "reward_start": round(curve[0], 4) if curve else None,
            "reward_end": round(curve[-1], 4) if curve else None,
            "train": _rounded(res.train.metrics),
            "heldout_before": _rounded(res.heldout_before),
            "heldout_after": _rounded(res.heldout_after),
        },
        as_json,
    )


@click.command("distill")
@run_config_options
def distill(config: Path | None, overrides: tuple[str, ...], as_json: bool) -> None:
    """Distil a teacher (`distill.teacher`: router checkpoint or ensemble dir) into a student."""

    res = train_distill(load_run_config(DistillRunConfig, config, overrides))
    echo_result(
        {
            "checkpoint": str(res.checkpoint),
            "run_dir": str(res.run_dir),
            "steps": res.train.step,
            "resumed_from": res.train.resumed_from,
            "teacher_cache_hit": res.cache_hit,
            "seconds": round(res.train.seconds, 2),
            "train": _rounded(res.train.metrics),
            "heldout_before": _rounded(res.heldout_before),
            "heldout_after": _rounded(res.heldout_after),
        },
        as_json,
    )
