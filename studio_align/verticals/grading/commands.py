"""The grading vertical's commands: `train grading`, `grade`, `eval grading`.

Thin: each parses options, calls one library function in `verticals.grading` and prints.
Added by the vertical's plugin (`plugin.py`), imported only when one of them runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from studio_align.commands import deferred, echo_result, load_run_config, run_config_options
from studio_align.errors import DataError
from studio_align.jsonsafe import json_safe
from studio_align.verticals.grading.run_config import GradingRunConfig

grade_files = deferred("studio_align.verticals.grading.apply:grade_files")
evaluate_grading = deferred("studio_align.verticals.grading.evaluate:evaluate_grading")
creator_rows = deferred("studio_align.verticals.grading.report:creator_rows")
train_grading = deferred("studio_align.verticals.grading.train:train_grading")


@click.command("grading")
@run_config_options
def train_grading_cmd(config: Path | None, overrides: tuple[str, ...], as_json: bool) -> None:
    """Grading model from retouch, selection and rating logs over the platform's images.

    Reward model (or `reward.model`), behaviour cloning, then GRPO or DPO (`algorithm`);
    writes RUN_DIR/model (what `grade` and `eval grading` take) and RUN_DIR/report.json.
    """

    cfg = load_run_config(GradingRunConfig, config, overrides)
    rep = train_grading(cfg)
    if as_json:
        click.echo(json.dumps(json_safe(rep), indent=1, ensure_ascii=False))
        return
    d = rep["data"]
    echo_result(
        {
            "model": rep["model"],
            "creators": ", ".join(rep["creators"]),
            "events": {k: sum(d[k].values()) for k in ("retouches", "selections", "ratings")},
            "skipped": d["skipped"] or "none",
            "stages": {k: v.get("steps") for k, v in rep["stages"].items()},
            "seconds": {k: round(v, 1) for k, v in rep["seconds"].items()},
        },
        False,
    )
    for c, v in rep["heldout_delta_e"]["tuned"].items():
        b = rep["heldout_delta_e"]["base"].get(c, {}).get("delta_e", float("nan"))
        click.echo(
            f"  {c:<12} held-out ΔE2000 to own retouches: tuned {v['delta_e']:.2f}  base {b:.2f}"
        )
    for p in d["problems"][:5]:
        click.echo(f"  skipped: {p}", err=True)


@click.command("grade")
@click.option("--checkpoint", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path), help="RUN_DIR/model of `train grading`.")  # fmt: skip
@click.option("--creator", required=True, help="Whose grade (an unknown creator gets the population's).")  # fmt: skip
@click.option("--style", default="", help="Style request, e.g. 'warm film look'.")
@click.argument("inputs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), help="Output folder (same names, size, EXIF and ICC).")  # fmt: skip
@click.option("--export-lut", type=click.Path(file_okay=False, path_type=Path), help="Also write <image stem>.cube per image into this folder.")  # fmt: skip
@click.option("--lut-size", type=click.IntRange(2, 65), default=33, show_default=True)
@click.option("--reference", type=click.Choice(["neutral"]), help="With --export-lut: one LUT for the creator and style on a neutral reference.")  # fmt: skip
@click.option("--exact", is_flag=True, help="Render with the exact renderer instead of the grade's 3D LUT.")  # fmt: skip
@click.option("--workers", type=click.IntRange(1), help="Images graded side by side (default: one per core).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True)
def grade(
    checkpoint: Path,
    creator: str,
    style: str,
    inputs: tuple[Path, ...],
    out_dir: Path | None,
    export_lut: Path | None,
    lut_size: int,
    reference: str | None,
    exact: bool,
    workers: int | None,
    as_json: bool,
) -> None:
    """Apply a creator's tuned grade to image files or folders (and export .cube LUTs)."""

    if not inputs and reference is None:
        raise DataError("give image files or folders to grade (or --reference neutral)")
    st = grade_files(
        checkpoint, inputs, out_dir, creator=creator, style=style, export_lut=export_lut,
        lut_size=lut_size, reference=reference, exact=exact, workers=workers,
    )  # fmt: skip
    if as_json:
        click.echo(json.dumps(json_safe(st), indent=1))
        return
    if not st["known_creator"]:
        click.echo(f"note: creator {creator!r} is unknown to the model; population grade", err=True)
    if "reference_lut" in st:
        click.echo(f"reference LUT: {st['reference_lut']}")
    click.echo(
        f"graded {st['images']} image(s), {st['megapixels']:.1f} MP in {st['seconds']:.2f} s "
        f"({st['megapixels_per_s']:.1f} MP/s); skipped {len(st['skipped'])}"
    )
    for path, why in list(st["skipped"].items())[:10]:
        click.echo(f"  skipped {path}: {why}", err=True)


@click.command("grading")
@click.option("--checkpoint", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))  # fmt: skip
@click.option("--logs", required=True, multiple=True, type=click.Path(exists=True, path_type=Path), help="Logs (held-out groups are selected with the run's split).")  # fmt: skip
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path), help="Write index.html with before/after grids.")  # fmt: skip
@click.option("--quarantine", type=click.Path(dir_okay=False, path_type=Path), help="Copy invalid log lines here verbatim and evaluate on the rest.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True)
def eval_grading(
    checkpoint: Path,
    logs: tuple[Path, ...],
    report_dir: Path | None,
    quarantine: Path | None,
    as_json: bool,
) -> None:
    """Per creator: reward-model accuracy, win rates under held-out selections, ΔE2000."""

    fig = evaluate_grading(
        checkpoint, [str(x) for x in logs], report_dir=report_dir, quarantine=quarantine
    )
    if as_json:
        click.echo(json.dumps(json_safe(fig), indent=1))
        return

    def f(x: object) -> str:
        return f"{x:.3f}" if isinstance(x, float) else "  –  "

    click.echo(
        "creator       RM acc  win/untuned  win/identity  look-win/untuned  ΔE tuned  ΔE untuned"
    )
    for row in creator_rows(fig):
        click.echo(
            f"{row['creator']:<12}  {f(row['rm_accuracy'])}   {f(row['win_vs_untuned'])}        "
            f"{f(row['win_vs_identity'])}         {f(row['look_win_vs_untuned'])}"
            f"             {f(row['delta_e_tuned'])}     {f(row['delta_e_untuned'])}"
        )
    click.echo(json.dumps(json_safe(fig["summary"])))
    if "report" in fig:
        click.echo(f"report: {fig['report']}")
