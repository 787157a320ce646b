"""The router's commands: `train router --logs`, `eval router`, `model ensemble-router`,
`model calibrate-router`, `model fit-prior`.

Added to the core groups by the router's plugin (`router/plugin.py`), imported only when
one of them runs. `train router` is a thin call into `from_logs.train_router_from_logs`;
options given on the command line win over `--config`, then `--set` overrides win over both.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from studio_align.commands import deferred
from studio_align.config import apply_overrides, read_toml, validate
from studio_align.errors import CheckpointError
from studio_align.jsonsafe import json_safe
from studio_align.router.settings import FromLogsConfig, PriorSettings

fit_checkpoint_prior = deferred("studio_align.router.checkpoint_prior:fit_checkpoint_prior")
calibrate_checkpoint = deferred("studio_align.router.checkpoint_calibrate:calibrate_checkpoint")
evaluate_checkpoint = deferred("studio_align.router.checkpoint_eval:evaluate_checkpoint")
check_members = deferred("studio_align.router.ensemble:check_members")
save_ensemble = deferred("studio_align.router.ensemble:save_ensemble")
train_router_from_logs = deferred("studio_align.router.from_logs:train_router_from_logs")
load_router = deferred("studio_align.router.router:Router.load")


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

    if len(routers) < 2:
        raise CheckpointError("an ensemble needs at least two routers (trained from other seeds)")
    check_members(routers, out)
    # each member loaded once: one that is not a router, or damaged, is refused now, not
    # when the ensemble is first used
    names = [list(load_router(r).catalog.names) for r in routers]
    if any(n != names[0] for n in names):
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
@click.option("--reference", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="The SFT router CHECKPOINT was tuned from: fit thresholds on the rows both plan alike.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def calibrate_router(
    checkpoint: Path,
    validation: Path,
    train: Path | None,
    target: float | None,
    unfamiliarity_in_confidence: bool,
    reference: Path | None,
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
        reference=reference,
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


_PRIOR = PriorSettings()


@click.command("fit-prior")
@click.argument("checkpoint", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--train", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Labelled training requests (JSONL: request, plan), the router's own at best.")  # fmt: skip
@click.option("--val", "validation", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="Labelled validation requests: choose the L2 weight on them.")  # fmt: skip
@click.option("--strength", type=click.FloatRange(min=0.0, min_open=True), default=_PRIOR.strength, show_default=True,
              help="Weight of the prior's log-probability against the router's.")  # fmt: skip
@click.option("--top-k", type=click.IntRange(min=1), default=_PRIOR.top_k, show_default=True,
              help="How many of the prior's plans are candidates.")  # fmt: skip
@click.option("--windows", type=click.FloatRange(min=0.0), default=_PRIOR.windows, show_default=True,
              help="Weight of the prior against the plans of a long request's windows of sentences; 0: none.")  # fmt: skip
@click.option("--asks/--no-asks", default=_PRIOR.asks, show_default=True,
              help="Only the windows holding the sentence most like a request compete.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def fit_prior_command(
    checkpoint: Path,
    train: Path,
    validation: Path | None,
    strength: float,
    top_k: int,
    windows: float,
    asks: bool,
    as_json: bool,
) -> None:
    """Fit CHECKPOINT's plan prior, which re-ranks the plans of requests longer than the
    router reads (docs/router.md), and save it beside the weights."""
    res = fit_checkpoint_prior(checkpoint, train, validation=validation, strength=strength,
                               top_k=top_k, windows=windows, asks=asks)  # fmt: skip
    if as_json:
        click.echo(json.dumps(res, indent=2))
        return
    click.echo(
        f"{checkpoint}: plan prior over {res['plans']} plans from {res['train']} requests "
        f"(strength {strength:g}, top {top_k}, windows {windows:g}, asks {'on' if asks else 'off'})"
    )


# -- `train router --logs`: raw logs in, a tuned router and its report out -------------

_PATH = click.Path(path_type=Path)


def _eval_sets(items: tuple[str, ...]) -> dict[str, str]:
    sets = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise click.BadParameter(f"{item!r}: expected NAME=FILE", param_hint="--eval")
        sets[name.strip()] = path.strip()
    return sets


@click.command("router")
@click.option(
    "--logs",
    multiple=True,
    type=_PATH,
    help="Event logs: *.jsonl files or directories (repeatable).",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for config.toml, quarantine/, compiled/, stages/, router/, report/.",
)
@click.option(
    "--base", type=_PATH, default=None, help="A Hugging Face Gemma 3 directory to start from."
)
@click.option("--init-from", type=_PATH, default=None, help="A router checkpoint to start from.")
@click.option(
    "--examples",
    multiple=True,
    type=_PATH,
    help="Extra labelled routing examples, JSONL {request, plan} (repeatable).",
)
@click.option(
    "--val",
    multiple=True,
    type=_PATH,
    help="Validation examples (default: a tenth of the labelled examples, set aside).",
)
@click.option(
    "--eval",
    "eval_sets",
    multiple=True,
    metavar="NAME=FILE",
    help="An extra evaluation set; `creators=FILE` replaces the logs' held-out split as the main set.",
)
@click.option(
    "--config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A config written by an earlier run (OUT/config.toml): reruns it.",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a setting, e.g. --set sft.steps=200 (keys: `config show router`).",
)
def train_router(
    logs: tuple[Path, ...], out_dir: Path, base: Path | None, init_from: Path | None,
    examples: tuple[Path, ...], val: tuple[Path, ...], eval_sets: tuple[str, ...],
    config: Path | None, overrides: tuple[str, ...],
) -> None:  # fmt: skip
    """Validate, compile and train the router on your logs: SFT, DPO (KTO, GRPO), report.

    Defaults are the quickstart's tuned settings; every setting used is written to
    OUT/config.toml (`--config OUT/config.toml` reruns it). Leaves OUT/router/ and
    OUT/report/index.html; invalid log lines are set aside in OUT/quarantine/.
    """
    data: dict[str, Any] = read_toml(config) if config is not None else {}
    given = {"logs": [str(p) for p in logs], "examples": [str(p) for p in examples],
             "val": [str(p) for p in val], "eval": _eval_sets(eval_sets)}  # fmt: skip
    data.update({k: v for k, v in given.items() if v})
    data.update({k: str(v) for k, v in (("base", base), ("init_from", init_from)) if v})
    if not data.get("logs"):
        raise click.UsageError("give --logs DIR_OR_FILE (or --config with `logs`)")
    keys = [o.partition("=")[0].strip() for o in overrides]
    cfg = validate(FromLogsConfig, apply_overrides(data, overrides),
                   source=str(config) if config else "options", overridden=keys)  # fmt: skip

    def log(line: str) -> None:
        click.echo(line)
        sys.stdout.flush()

    result = train_router_from_logs(out_dir, cfg, log=log)
    if result.router is None:
        raise click.ClickException("no router was trained; see the messages above")
    failed = [m for m in result.missing if "failed" in m]
    if failed:
        raise click.ClickException("stages failed: " + "; ".join(failed))
