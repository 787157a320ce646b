"""`eval router`'s library function: load a router checkpoint, score it on a labelled
file, and optionally write the HTML report (kept apart from the pure metrics in
`evaluate.py`, which the router's calibration uses, so neither imports the other's
dependencies)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from studio_align.errors import DataError
from studio_align.router.data import read_examples
from studio_align.router.ensemble import load_any_router
from studio_align.router.evaluate import errors, evaluate_router
from studio_align.router.report import write_report


def evaluate_checkpoint(
    checkpoint: str | Path,
    data: str | Path,
    *,
    report_dir: str | Path | None = None,
    batch_size: int = 64,
) -> dict[str, Any]:
    """`eval router`: load a router checkpoint (or an ensemble directory, `ensemble.py`),
    score it on a labelled JSONL file, and optionally write the HTML/PNG report. Returns
    the figures (JSON-ready)."""

    examples = read_examples(data)
    if not examples:
        raise DataError(f"{data}: no labelled routing examples")
    router = load_any_router(checkpoint)  # a router checkpoint or an ensemble of them
    # a label with a step this router does not know would be scored as a silent miss
    examples = read_examples(data, router.catalog, steps_only=True)
    figures, plans, confs = evaluate_router(router, examples, batch_size=batch_size)
    figures["checkpoint"] = str(checkpoint)
    figures["data"] = str(data)
    if report_dir is not None:
        page = write_report(
            report_dir,
            figures,
            title=f"Router evaluation: {Path(checkpoint).name} on {Path(data).name}",
            mistakes=errors(examples, plans, confs),
        )
        figures["report"] = str(page)
    return figures
