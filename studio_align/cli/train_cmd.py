"""`studio-align train sft`: supervised fine-tuning of any registered task.

The `train` group itself is a lazy group of the root (`studio_align.cli.CORE_SUBCOMMANDS`);
products add their own `train` subcommands through `studio_align_register_commands`.
"""

from __future__ import annotations

from pathlib import Path

import click

from studio_align.commands import deferred, echo_result, load_run_config, run_config_options
from studio_align.training.sft_config import SFTConfig

train_sft = deferred("studio_align.training.sft:train_sft")


@click.command("sft")
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
