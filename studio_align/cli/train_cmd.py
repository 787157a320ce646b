"""`studio-align train ...`: one subcommand per trainer, each a thin call into the library.

`train sft` lives here. Other trainers add their subcommand from their own module:

    from studio_align.cli.train_cmd import run_config_options, load_run_config, train

    @train.command("dpo")
    @run_config_options
    def dpo(config, overrides, as_json): ...

and list that module in `TRAIN_COMMAND_MODULES` below (modules not written yet are
skipped). Plugins can also attach subcommands with `studio_align_register_commands`.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from studio_align.cli import main
from studio_align.config import load_config
from studio_align.training.sft import SFTConfig, train_sft

F = TypeVar("F", bound=Callable[..., Any])

TRAIN_COMMAND_MODULES: list[str] = [
    "train_pref_cmd", "train_reward_cmd", "train_router_cmd", "train_rl_cmd",
]  # fmt: skip


@main.group("train")
def train() -> None:
    """Train a model from a run config (TOML) with `--set key=value` overrides."""


def run_config_options(f: F) -> F:
    """`--config RUN.toml`, repeatable `--set key=value`, and `--json`."""
    f = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")(f)
    f = click.option(
        "--set", "overrides", multiple=True, metavar="KEY=VALUE",
        help="Override a config key, e.g. --set optim.learning_rate=1e-3 (repeatable).",
    )(f)  # fmt: skip
    f = click.option(
        "--config", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
        help="Run config (TOML).",
    )(f)  # fmt: skip
    return f


def load_run_config(model: type, config: Path | None, overrides: tuple[str, ...]) -> Any:
    return load_config(model, config, overrides)


def echo_result(payload: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(payload, indent=2, ensure_ascii=False, default=str))
        return
    for k, v in payload.items():
        if isinstance(v, dict):
            inner = "  ".join(
                f"{a}={b:.4g}" if isinstance(b, float) else f"{a}={b}" for a, b in v.items()
            )
            click.echo(f"{k}: {inner}")
        else:
            click.echo(f"{k}: {v}")


@train.command("sft")
@run_config_options
def sft(config: Path | None, overrides: tuple[str, ...], as_json: bool) -> None:
    """Supervised fine-tuning of a task (`task = "router"` by default) on labelled records."""
    cfg = load_run_config(SFTConfig, config, overrides)
    res = train_sft(cfg)
    echo_result(
        {
            "checkpoint": str(res.checkpoint),
            "run_dir": str(res.run_dir),
            "steps": res.train.step,
            "resumed_from": res.train.resumed_from,
            "seconds": round(res.train.seconds, 2),
            "train": res.metrics,
            "heldout_before": res.heldout_before,
            "heldout": res.eval_metrics,
        },
        as_json,
    )


for _stem in TRAIN_COMMAND_MODULES:
    try:
        importlib.import_module(f"studio_align.cli.{_stem}")
    except ModuleNotFoundError as _e:
        if _e.name != f"studio_align.cli.{_stem}":
            raise
