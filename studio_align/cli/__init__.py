"""The `studio-align` command line (click).

Thin by design: every command parses options, calls one library function and prints.
Library errors (`StudioAlignError`) become a one-line reason and exit code 2 here, and
only here.
"""

from __future__ import annotations

import click

from studio_align import __version__


@click.group()
@click.version_option(__version__, prog_name="studio-align")
def main() -> None:
    """Alignment SDK for creative platforms."""


def _register_subcommands() -> None:
    # Each command group lives in its own module; imported here so `main` is complete.
    from studio_align.cli import data_cmd, eval_cmd, train_cmd  # noqa: F401


# _register_subcommands() is wired in by the plugin-host work (see plugins_cmd).
