"""`studio-align serve router`: the tuned router over HTTP.

The admin token is read from `STUDIO_ALIGN_ADMIN_TOKEN` (or `--set admin_token=...` /
the config file), never from a plain command-line option, where other users of the
machine could read it in the process list. Platform keys for signed feedback live in a
file (`--feedback-keys FILE`), for the same reason.
"""

from __future__ import annotations

import os

import click

from studio_align.commands import deferred
from studio_align.config import apply_overrides, read_toml, validate
from studio_align.serving.settings import ServeConfig

run = deferred("studio_align.serving.server:serve")


@click.group("serve")
def serve() -> None:
    """Serve tuned models over HTTP."""


@serve.command("router")
@click.option("--checkpoint", required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--host", default=None, help="Bind address [default: 127.0.0.1].")
@click.option("--port", default=None, type=click.IntRange(1, 65535), help="Port [default: 8000].")
@click.option(
    "--feedback-log", default=None, help="JSONL file that /v1/feedback appends route events to."
)
@click.option(
    "--feedback-dir",
    default=None,
    help="Folder for the feedback log [default: beside the checkpoint].",
)
@click.option(
    "--feedback-keys",
    "feedback_keys_file",
    default=None,
    help="TOML file of platform keys that sign feedback (docs/serving.md); required off loopback.",
)
@click.option(
    "--abstain-below", default=None, type=float, help="Confidence below which responses abstain."
)
@click.option(
    "--watch",
    "watch_seconds",
    default=None,
    type=float,
    help="Poll the checkpoint dir every N s and reload on change.",
)
@click.option("--config", "config_path", default=None, type=click.Path(exists=True, dir_okay=False))
@click.option("--set", "overrides", multiple=True, help="Override a config key: key=value.")
def serve_router(
    checkpoint: str,
    host: str | None,
    port: int | None,
    feedback_log: str | None,
    feedback_dir: str | None,
    feedback_keys_file: str | None,
    abstain_below: float | None,
    watch_seconds: float | None,
    config_path: str | None,
    overrides: tuple[str, ...],
) -> None:
    """Serve a router checkpoint: POST /v1/route, /v1/feedback; GET /healthz, /metrics."""

    data = apply_overrides(read_toml(config_path) if config_path else {}, overrides)
    explicit = {
        "checkpoint": checkpoint,
        "host": host,
        "port": port,
        "feedback_log": feedback_log,
        "feedback_dir": feedback_dir,
        "feedback_keys_file": feedback_keys_file,
        "abstain_below": abstain_below,
        "watch_seconds": watch_seconds,
    }
    data.update({k: v for k, v in explicit.items() if v is not None})
    token = os.environ.get("STUDIO_ALIGN_ADMIN_TOKEN")
    if token and "admin_token" not in data:
        data["admin_token"] = token
    run(validate(ServeConfig, data, source=config_path or "serve router"))
