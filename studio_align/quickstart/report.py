"""Scoring each stage's router, the grading vertical's demo, and the final HTML report."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from studio_align.intents import eval as packaged
from studio_align.intents.calibration import fit_calibration
from studio_align.intents.evaluate import errors, evaluate_router
from studio_align.intents.report import write_report
from studio_align.intents.router import Router
from studio_align.quickstart.config import QuickstartConfig, StageResult
from studio_align.quickstart.flow import flow_report_parts
from studio_align.training.progress import heartbeat
from studio_align.verticals.grading.demo import run_grading_demo

Log = Callable[[str], None]


def calibrate_stage(checkpoint: Path, cfg: QuickstartConfig, data: dict[str, Any]) -> None:
    """Fit temperature, unfamiliarity model and abstain thresholds on validation only (the
    hand-written validation set + generator validation) and save them in the checkpoint."""
    router = Router.load(checkpoint)
    router.calibration = None
    val = packaged.load("handwritten_val") + list(data["splits"]["val"][:80])
    cal = fit_calibration(router, data["splits"]["train"], val, target=cfg.abstain_target)
    cal.save(checkpoint)


def evaluate_stage(
    checkpoint: Path, sets: dict[str, list[dict[str, Any]]], batch_size: int
) -> dict[str, Any]:
    router = Router.load(checkpoint)
    return {
        name: evaluate_router(router, rows, batch_size=batch_size)[0] for name, rows in sets.items()
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


def run_grading(
    out: Path, cfg: QuickstartConfig, log: Log, missing: list[str]
) -> dict[str, Any] | None:
    """The grading vertical's own demo loop (issue: aesthetic alignment), if present."""
    t = time.perf_counter()
    try:
        with heartbeat("grading", "reward model + GRPO colour grading"):
            rep = run_grading_demo(out / "grading", seed=cfg.seed, quick=True)
    except Exception as e:
        missing.append(f"grading: failed ({type(e).__name__}: {e})")
        (out / "grading_error.txt").write_text(traceback.format_exc(), encoding="utf-8")
        log(f"      grading: FAILED ({type(e).__name__}: {e})")
        return None
    seconds = time.perf_counter() - t
    rm, gr = rep.get("reward_model", {}), rep.get("grading", {})
    log(
        f"      grading ok {seconds:.0f}s: reward-model held-out accuracy "
        f"{rm.get('heldout_accuracy', float('nan')):.3f} (ceiling {rm.get('consistency_ceiling', float('nan')):.3f}); "
        f"GRPO win rate vs untuned {gr.get('win_rate_grpo_vs_untuned', float('nan')):.2f}, "
        f"vs identity {gr.get('win_rate_grpo_vs_identity', float('nan')):.2f}"
    )
    return {"seconds": seconds, "reward_model": rm, "grading": gr, "dir": str(out / "grading")}


def write_pipeline_report(
    report_dir: Path,
    stages: list[StageResult],
    data: dict[str, Any],
    router_dir: Path,
    cfg: QuickstartConfig,
    missing: list[str],
    *,
    grading: dict[str, Any] | None = None,
    timings: dict[str, float] | None = None,
    flow: dict[str, Any] | None = None,
) -> Path:
    """The final router's report (creators' preferred plans as the main set)."""
    router = Router.load(router_dir)
    sets = data["eval_sets"]
    main, plans, confs = evaluate_router(router, sets["creators"], batch_size=cfg.eval_batch_size)
    extra = {
        name: evaluate_router(router, rows, batch_size=cfg.eval_batch_size)[0]
        for name, rows in sets.items()
        if name != "creators"
    }
    ok = [s for s in stages if s.status == "ok"]
    notes = [
        f"Main figures: the final router ({ok[-1].stage if ok else '?'}) against the preferred plans of "
        f"{cfg.n_eval_creators} simulated creators it never saw, writing with held-out phrasings.",
        "held-out = labelled demo plans with unseen phrasings; handwritten = 50 requests written by hand.",
    ]
    images: list[tuple[str, Path]] = []
    if grading:
        rm, gr = grading["reward_model"], grading["grading"]
        notes.append(
            f"Grading vertical ({grading['seconds']:.0f}s): reward model held-out pairwise accuracy "
            f"{rm.get('heldout_accuracy', float('nan')):.3f} against a consistency ceiling of "
            f"{rm.get('consistency_ceiling', float('nan')):.3f}; GRPO-tuned grading wins "
            f"{gr.get('win_rate_grpo_vs_untuned', float('nan')):.0%} against the untuned policy and "
            f"{gr.get('win_rate_grpo_vs_identity', float('nan')):.0%} against the identity grade."
        )
        images = [
            ("Colour grading: before / after", p)
            for p in sorted(Path(grading["dir"]).glob("*.png"))
        ]
    if flow:
        flow_notes, flow_images = flow_report_parts(flow)
        notes += flow_notes
        images = images + flow_images
    if missing:
        notes.append("Not run: " + "; ".join(missing))
    return write_report(
        report_dir,
        main,
        title="studio-align quickstart: intent router",
        mistakes=errors(sets["creators"], plans, confs),
        stages=[s.row() for s in stages],
        extra_metrics=extra,
        notes=notes,
        extra_images=images,
        main_set="creators",
        timings=[(name, sec) for name, sec in (timings or {}).items()],
    )
