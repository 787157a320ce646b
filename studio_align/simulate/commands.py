"""The simulators' commands: `data demo-grading` writes a simulated grading platform,
`data demo-flow` a simulated flow selection round (the packaged base's candidates, each
simulated creator's picks).

Added by the simulators' plugin (`simulate/plugin.py`), imported only when it runs.
"""

from __future__ import annotations

from pathlib import Path

import click

from studio_align.commands import deferred
from studio_align.errors import DataError
from studio_align.simulate.flow.creators import CREATORS

collect_selections = deferred("studio_align.simulate.flow.selections:collect_selections")
write_platform_demo = deferred("studio_align.simulate.grading.platform:write_platform_demo")
load_flow = deferred("studio_align.verticals.flow.checkpoint:load_flow")


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

    _refuse_existing(out_dir / "logs.jsonl")
    log = write_platform_demo(
        out_dir, retouches=retouches, selections=selections, ratings=ratings, size=size,
        image_format=image_format, seed=seed,
    )  # fmt: skip
    click.echo(str(log))


@click.command("demo-flow")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--checkpoint", default="base", show_default=True, help="Flow checkpoint that draws the candidates (a path, or a packaged base: 'base', 'base64').")  # fmt: skip
@click.option("--creator", "creators", multiple=True, help="Simulated creator (repeatable; default: all).")  # fmt: skip
@click.option("--events-per-set", type=click.IntRange(1), default=12, show_default=True, help="Selection events per training tag set.")  # fmt: skip
@click.option("--k", type=click.IntRange(2), default=4, show_default=True, help="Candidates per event.")  # fmt: skip
@click.option("--seed", type=int, default=0)
def demo_flow(
    out_dir: Path, checkpoint: str, creators: tuple[str, ...], events_per_set: int, k: int,
    seed: int,
) -> None:  # fmt: skip
    """Write simulated creators' picks among a flow model's samples (selection JSONL and PNGs)."""
    _refuse_existing(out_dir / "selections.jsonl")
    base, _ = load_flow(checkpoint)  # a path, or a packaged base's name
    sel = collect_selections(base, out_dir, list(creators or CREATORS), seed=seed,
                             events_per_set=events_per_set, k=k)  # fmt: skip
    click.echo(str(sel["log"]))


def _refuse_existing(log: Path) -> None:
    """A demo never replaces a log (it may be a real export, or one a run was trained on)."""
    if log.exists():
        raise DataError(f"{log}: already exists; give --out a new folder (a demo never "
                        "replaces a log)")  # fmt: skip
