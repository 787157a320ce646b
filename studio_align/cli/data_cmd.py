"""`studio-align data validate|compile`: creator-log ingestion from the command line.

Exit codes: 0 all lines valid (or invalid ones quarantined); 1 invalid lines and no
`--quarantine` (each printed as `file:line: reason: detail`); 2 bad input (a missing
file, a bad option, an unwritable quarantine), as one line on stderr (the root group
turns `StudioAlignError` into that). Plan steps are checked against the plugin host's
catalog, so engines registered by plugins (`--plugin`) are known steps.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from studio_align.catalog import Catalog
from studio_align.data.compile import InvalidLogError, compile_logs
from studio_align.data.reader import InvalidLine, ReadSummary, validate_logs
from studio_align.data.schemas import EVENT_TYPES
from studio_align.plugins import get_host


def _catalog() -> Catalog:
    """The plugin host's catalog, so engines that plugins register count as known steps."""
    return get_host().catalog


def _print_invalid(bad: InvalidLine) -> None:
    click.echo(str(bad))


def _print_summary(summary: ReadSummary) -> None:
    click.echo(
        f"lines: {summary.total_lines}  valid: {summary.valid}  "
        f"invalid: {summary.invalid_count}  blank: {summary.blank}"
    )
    for t in EVENT_TYPES:
        click.echo(f"  {t:<10} {summary.by_type.get(t, 0)}")
    if summary.by_reason:
        reasons = ", ".join(f"{k}={v}" for k, v in sorted(summary.by_reason.items()))
        click.echo(f"invalid by reason: {reasons}")
    for f in summary.incomplete_tails:
        click.echo(
            f"{f.path}: ends in an incomplete line ({f.incomplete_tail} bytes after the last "
            "newline, not read: a writer may still be appending)"
        )
    if summary.quarantine is not None:
        click.echo(f"quarantined {summary.invalid_count} line(s) to {summary.quarantine}")


logs_argument = click.argument(
    "logs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path)
)
quarantine_option = click.option(
    "--quarantine",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Copy invalid lines here verbatim and use the rest (exit 0).",
)
images_option = click.option(
    "--check-images/--no-check-images",
    default=True,
    show_default=True,
    help="Check that every image a line names exists (relative to its log file).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


@click.command("validate")
@logs_argument
@quarantine_option
@images_option
@json_option
def validate_cmd(
    logs: tuple[Path, ...], quarantine: Path | None, check_images: bool, as_json: bool
) -> None:
    """Check LOGS (files, or directories of *.jsonl) line by line.

    Prints counts by event type and every invalid line as FILE:LINE: REASON: DETAIL.
    Exits 1 if a line is invalid and no --quarantine was given.
    """
    summary = validate_logs(  # OSError (full disk, ...): one line from the root group
        logs,
        catalog=_catalog(),
        check_images=check_images,
        quarantine=quarantine,
        on_invalid=None if as_json else _print_invalid,
    )
    if as_json:
        click.echo(json.dumps(summary.to_dict(), ensure_ascii=False, indent=2))
    else:
        _print_summary(summary)
    if summary.invalid_count and quarantine is None:
        sys.exit(1)


@click.command("compile")
@logs_argument
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the train/held-out split."
)
@click.option(
    "--heldout-fraction",
    type=click.FloatRange(0.0, 1.0),
    default=0.2,
    show_default=True,
    help="Expected share of (creator, session) groups held out.",
)
@quarantine_option
@images_option
@json_option
def compile_cmd(
    logs: tuple[Path, ...],
    out_dir: Path,
    seed: int,
    heldout_fraction: float,
    quarantine: Path | None,
    check_images: bool,
    as_json: bool,
) -> None:
    """Write what each event of LOGS teaches into OUT, split into train/ and heldout/.

    Records: selection_pairs, route_dpo_pairs, routing_examples, kto_samples, retouch
    (JSONL, one file per split), plus manifest.json with the counts. Refuses (exit 1,
    nothing written) if a line is invalid and no --quarantine was given.
    """
    try:
        result = compile_logs(
            logs,
            out_dir,
            seed=seed,
            heldout_fraction=heldout_fraction,
            catalog=_catalog(),
            check_images=check_images,
            quarantine=quarantine,
            on_invalid=None if as_json else _print_invalid,
        )
    except InvalidLogError as e:
        if as_json:
            click.echo(
                json.dumps({"error": str(e), **e.summary.to_dict()}, ensure_ascii=False, indent=2)
            )
        else:
            _print_summary(e.summary)
            click.echo(f"Error: {e}", err=True)
        sys.exit(1)
    manifest: dict[str, Any] = result.manifest
    if as_json:
        click.echo(json.dumps(manifest, ensure_ascii=False, indent=2))
        return
    _print_summary(result.summary)
    click.echo(f"wrote {result.out_dir}/ (seed {seed}, groups {manifest['groups']})")
    width = max(map(len, manifest["records"]))
    for name, n in manifest["records"].items():
        click.echo(f"  {name:<{width}}  train {n['train']:>8}  heldout {n['heldout']:>8}")
    for w in manifest["warnings"]:
        click.echo(f"warning: {w}", err=True)
