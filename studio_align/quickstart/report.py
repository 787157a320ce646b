"""The quickstart's HTML report: the router's report with the grading and flow stages' lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from studio_align.quickstart.config import QuickstartConfig
from studio_align.quickstart.flow import flow_report_parts
from studio_align.quickstart.grading import grading_notes
from studio_align.router.settings import RouterSettings, StageData, StageResult
from studio_align.router.stage_run import write_router_report


def write_pipeline_report(
    report_dir: Path,
    stages: list[StageResult],
    data: StageData,
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
    """The quickstart's report: the router's (`main_set`, the unseen creators' preferred
    plans, as the main figures), with the grading and flow stages' lines and images."""
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
    return write_router_report(
        report_dir, stages, data, router_dir, cfg, missing, notes=notes, images=images,
        timings=timings, main_set=main_set, title=title,
    )  # fmt: skip
