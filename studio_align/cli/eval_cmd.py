"""`studio-align eval router`: score a router checkpoint on labelled routing examples."""

from __future__ import annotations

import json
from pathlib import Path

import click

from studio_align.cli import main
from studio_align.jsonsafe import json_safe
from studio_align.router.checkpoint_eval import evaluate_checkpoint


@main.group("eval")
def eval_group() -> None:
    """Evaluate trained models."""


@eval_group.command("router")
@click.option(
    "--checkpoint",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Router checkpoint directory (model bundle + router.json).",
)
@click.option(
    "--data",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Labelled routing examples (JSONL: request, plan).",
)
@click.option("--json", "as_json", is_flag=True, help="Print every figure as JSON.")
@click.option(
    "--report",
    "report_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write PNG plots and index.html into this directory.",
)
@click.option("--batch-size", type=click.IntRange(1, 4096), default=64, show_default=True)
def eval_router(
    checkpoint: Path, data: Path, as_json: bool, report_dir: Path | None, batch_size: int
) -> None:
    """Exact-plan accuracy, step F1, validity, slices, confusion and calibration."""

    fig = evaluate_checkpoint(checkpoint, data, report_dir=report_dir, batch_size=batch_size)
    if as_json:
        click.echo(json.dumps(json_safe(fig), ensure_ascii=False, indent=1))
        return
    click.echo(f"{fig['n']} requests from {data}")
    click.echo(f"  exact-plan accuracy  {fig['exact_plan_accuracy']:.3f}")
    click.echo(f"  step F1              {fig['step_f1']:.3f}")
    click.echo(f"  valid plans          {fig['validity_rate']:.3f}")
    click.echo(
        f"  ECE                  {fig['ece']:.3f}  (mean confidence {fig['mean_confidence']:.3f})"
    )
    for lang, s in fig["by_language"].items():
        click.echo(f"  {lang:<4} n={s['n']:<5} exact {s['exact_plan_accuracy']:.3f}")
    for length, s in fig["by_plan_length"].items():
        click.echo(f"  {length}-step n={s['n']:<5} exact {s['exact_plan_accuracy']:.3f}")
    worst = sorted(fig["by_intent"].items(), key=lambda kv: kv[1]["exact_plan_accuracy"])[:3]
    click.echo(
        "  weakest intents: " + ", ".join(f"{k} {v['exact_plan_accuracy']:.2f}" for k, v in worst)
    )
    if "report" in fig:
        click.echo(f"report: {fig['report']}")
