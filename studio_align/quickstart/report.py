"""Scoring each stage's router, and the final HTML report (with the grading stage's lines)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from studio_align.quickstart.config import QuickstartConfig, RouterSettings, StageResult
from studio_align.quickstart.flow import flow_report_parts
from studio_align.quickstart.grading import grading_notes
from studio_align.router import eval as packaged
from studio_align.router.calibration import fit_calibration
from studio_align.router.evaluate import errors, evaluate_router_sets
from studio_align.router.report import write_report
from studio_align.router.router import Router

Log = Callable[[str], None]


def calibrate_stage(checkpoint: Path, cfg: RouterSettings, data: dict[str, Any]) -> None:
    """Fit temperature, unfamiliarity model and abstain thresholds on validation only (the
    hand-written validation set + generator validation) and save them in the checkpoint."""
    router = Router.load(checkpoint)
    router.calibration = None
    val = packaged.load("handwritten_val") + list(data["splits"]["val"][:80])
    cal = fit_calibration(
        router,
        data["splits"]["train"],
        val,
        target=cfg.abstain_target,
        unfamiliarity_in_confidence=cfg.unfamiliarity_in_confidence,
    )
    cal.save(checkpoint)


def evaluate_stage(
    checkpoint: Path, sets: dict[str, list[dict[str, Any]]], batch_size: int
) -> dict[str, Any]:
    router = Router.load(checkpoint)
    return {
        name: r[0] for name, r in evaluate_router_sets(router, sets, batch_size=batch_size).items()
    }


def _fmt(v: float) -> str:
    return "  -  " if v != v else f"{v:.3f}"


def summary_line(r: StageResult) -> str:
    row = r.row()
    return (
        f"{r.stage:<6} {r.status:<10} train {row['seconds']:>6.1f}s  eval {row['eval_seconds']:>5.1f}s  "
        f"held-out {_fmt(row['heldout_exact'])}  creators {_fmt(row['creator_agreement'])}  "
        f"handwritten {_fmt(row['handwritten_exact'])}  v2 {_fmt(row['handwritten_v2_exact'])} "
        f"(ECE {_fmt(row['handwritten_v2_ece'])})  valid {_fmt(row['validity_rate'])}  "
        f"(majority preference: held-out {_fmt(row['heldout_majority_exact'])}, "
        f"handwritten {_fmt(row['handwritten_majority_exact'])})"
    )


def write_pipeline_report(
    report_dir: Path,
    stages: list[StageResult],
    data: dict[str, Any],
    router_dir: Path,
    cfg: RouterSettings,
    missing: list[str],
    *,
    grading: dict[str, Any] | None = None,
    timings: dict[str, float] | None = None,
    main_set: str = "creators",
    title: str = "studio-align quickstart: intent router",
    intro: list[str] | None = None,
    flow: dict[str, Any] | None = None,
) -> Path:
    """The final router's report: `main_set` (the quickstart's: unseen creators' preferred
    plans) as the main figures, every other evaluation set beside it."""
    router = Router.load(router_dir)
    sets = data["eval_sets"]
    scored = evaluate_router_sets(router, sets, batch_size=cfg.eval_batch_size)
    main, plans, confs = scored[main_set]
    extra = {name: r[0] for name, r in scored.items() if name != main_set}
    ok = [s for s in stages if s.status == "ok"]
    if intro is None:
        n_eval = cfg.n_eval_creators if isinstance(cfg, QuickstartConfig) else "?"
        intro = [
            f"Main figures: the final router ({ok[-1].stage if ok else '?'}) against the preferred "
            f"plans of {n_eval} simulated creators it never saw, writing with held-out phrasings.",
            "held-out = labelled demo plans with unseen phrasings; handwritten = 50 requests "
            "written by hand.",
        ]
    notes = list(intro)
    images: list[tuple[str, Path]] = []
    if grading:
        notes += grading_notes(grading)
        images = [("Colour grading: held-out retouches, source | untuned | tuned | creator",
                   Path(p)) for p in grading["grids"]]  # fmt: skip
    if flow:
        flow_notes, flow_images = flow_report_parts(flow)
        notes += flow_notes
        images = images + flow_images
    if missing:
        notes.append("Not run: " + "; ".join(missing))
    return write_report(
        report_dir,
        main,
        title=title,
        mistakes=errors(sets[main_set], plans, confs),
        stages=[s.row() for s in stages],
        extra_metrics=extra,
        notes=notes,
        extra_images=images,
        main_set=main_set,
        timings=[(name, sec) for name, sec in (timings or {}).items()],
    )
