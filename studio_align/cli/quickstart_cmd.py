"""`studio-align quickstart`: the whole router loop on the embedded demo data."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from studio_align.cli import main
from studio_align.commands import deferred
from studio_align.config import apply_overrides, validate
from studio_align.quickstart.config import QuickstartConfig

run_quickstart = deferred("studio_align.quickstart.pipeline:run_quickstart")


@main.command("quickstart")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("quickstart-out"),
    show_default=True,
    help="Directory for data, stage checkpoints, router/ and report/.",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a setting, e.g. --set sft.steps=200 (router keys: `config show router`).",
)
def quickstart(out_dir: Path, overrides: tuple[str, ...]) -> None:
    """Generate demo creator logs, train the router (SFT -> DPO -> GRPO), evaluate, report.

    Leaves OUT/router/ (the final router checkpoint, for `eval router` and `serve
    router`) and OUT/report/index.html. A stage that fails is named in the output, the
    others still run and report, and the command exits non-zero.
    """

    cfg = validate(QuickstartConfig, apply_overrides({}, overrides), source="--set")

    def log(line: str) -> None:
        click.echo(line)
        sys.stdout.flush()

    result = run_quickstart(out_dir, cfg, log=log)
    if result.router is None:
        raise click.ClickException("no router was trained; see the messages above")
    failed = [m for m in result.missing if "failed" in m]
    if failed:  # the report is written, but a broken stage is not a success
        raise click.ClickException("stages failed: " + "; ".join(failed))
