"""`studio-align train router --logs ...`: raw logs in, a tuned router and its report out.

A thin call into `quickstart.from_logs.train_router_from_logs`; options given on the
command line win over `--config`, then `--set` overrides win over both.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from studio_align.config import apply_overrides, read_toml, validate
from studio_align.quickstart.from_logs import FromLogsConfig, train_router_from_logs

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
    help="Override a setting, e.g. --set sft_steps=200 (keys: `config show router`).",
)
def router_cmd(
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
