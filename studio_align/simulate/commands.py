"""The simulators' commands: `data demo-grading` writes a simulated grading platform.

Added by the simulators' plugin (`simulate/plugin.py`), imported only when it runs.
"""

from __future__ import annotations

from pathlib import Path

import click

from studio_align.simulate.grading.platform import write_platform_demo


@click.command("demo-grading")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--retouches", type=click.IntRange(0), default=60, show_default=True, help="Per creator.")  # fmt: skip
@click.option("--selections", type=click.IntRange(0), default=60, show_default=True, help="Per creator.")  # fmt: skip
@click.option("--ratings", type=click.IntRange(0), default=20, show_default=True, help="Per creator.")  # fmt: skip
@click.option("--size", type=click.IntRange(16), default=96, show_default=True, help="Image side in pixels.")  # fmt: skip
@click.option("--format", "image_format", type=click.Choice(["png", "jpg"]), default="png")
@click.option("--seed", type=int, default=0)
def demo_grading(
    out_dir: Path,
    retouches: int,
    selections: int,
    ratings: int,
    size: int,
    image_format: str,
    seed: int,
) -> None:
    """Write simulated creators' grading logs (JSONL) and images, as a platform exports them."""

    log = write_platform_demo(
        out_dir, retouches=retouches, selections=selections, ratings=ratings, size=size,
        image_format=image_format, seed=seed,
    )  # fmt: skip
    click.echo(str(log))
