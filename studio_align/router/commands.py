"""The router's commands: `eval router`, `model ensemble-router`, `model calibrate-router`.

Added to the core groups by the router's plugin (`router/plugin.py`), imported only when
one of them runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from studio_align.errors import CheckpointError
from studio_align.jsonsafe import json_safe
from studio_align.router.checkpoint_calibrate import calibrate_checkpoint
from studio_align.router.checkpoint_eval import evaluate_checkpoint
from studio_align.router.ensemble import save_ensemble
from studio_align.router.router import load_router_meta


@click.command("router")
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


@click.command("ensemble-router")
@click.argument("routers", nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False, path_type=Path))  # fmt: skip
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path))
def ensemble_router(routers: tuple[Path, ...], out: Path) -> None:
    """Combine ROUTERS (router checkpoints trained alike from different seeds) into one
    ensemble directory that routes by their mean plan probability; score it with
    `eval router --checkpoint OUT`."""

    catalogs = [load_router_meta(r)["catalog"] for r in routers]  # one line if not a router
    if any(c != catalogs[0] for c in catalogs):
        raise CheckpointError(f"{routers[0]} and the other routers route over different catalogs")
    d = save_ensemble(routers, out)
    click.echo(f"wrote {d}: {len(routers)} members")


@click.command("calibrate-router")
@click.argument("checkpoint", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--val", "validation", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Labelled validation requests (JSONL: request, plan); never the evaluation set.")  # fmt: skip
@click.option("--train", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Labelled training requests, for the unfamiliarity model (single routers).")  # fmt: skip
@click.option("--target", type=float, default=None,
              help="Selective accuracy the abstain thresholds keep on validation (0.95).")  # fmt: skip
@click.option("--unfamiliarity-in-confidence", is_flag=True,
              help="Fit the confidence on log-odds and unfamiliarity together (docs/router.md).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def calibrate_router(
    checkpoint: Path,
    validation: Path,
    train: Path | None,
    target: float | None,
    unfamiliarity_in_confidence: bool,
    as_json: bool,
) -> None:
    """Fit CHECKPOINT's temperature, unfamiliarity model and abstain thresholds (an
    ensemble: its temperature) on validation, and save them for `serve router`."""

    res = calibrate_checkpoint(
        checkpoint,
        validation,
        train=train,
        target=target,
        unfamiliarity_in_confidence=unfamiliarity_in_confidence,
    )
    if as_json:
        click.echo(json.dumps(res, indent=2))
        return
    if res["kind"] == "ensemble":
        click.echo(
            f"{checkpoint}: temperature {res['temperature']:.3f} ({res['validation']} validation requests)"
        )
        return
    ood = "none" if res["ood_threshold"] is None else f"{res['ood_threshold']:.2f}"
    click.echo(
        f"{checkpoint}: temperature {res['temperature']:.3f}, abstain below confidence "
        f"{res['confidence_threshold']:.3f} or above unfamiliarity {ood} "
        f"(target {res['target_accuracy']:.2f} on {res['validation']} validation requests, "
        f"accuracy {res['validation_accuracy']:.3f})"
    )
