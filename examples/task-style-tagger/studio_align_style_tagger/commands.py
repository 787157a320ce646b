"""The style tagger's own command: `studio-align data demo-style-tagger --out DIR`.

Added to studio-align's `data` group through `studio_align_register_commands`, and
imported only when it runs.
"""

from __future__ import annotations

from pathlib import Path

import click

from studio_align_style_tagger.demo import write_demo


@click.command("demo-style-tagger")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--steps", type=click.IntRange(1), default=120, show_default=True)
def demo(out: Path, seed: int, steps: int) -> None:
    """Write seeded style-tagging examples and an SFT run config; print the config's path."""
    click.echo(write_demo(out, seed=seed, steps=steps))
