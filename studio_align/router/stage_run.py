"""One router stage run end to end (train, mix with SFT, fit or carry the plan prior,
calibrate, evaluate), the summary line of each, the end of a pipeline run, and the
router's report. Shared by the quickstart and `train router --logs`; a failing stage is
recorded, never raised, so the others still report."""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from studio_align.catalog import Catalog
from studio_align.router import eval as packaged
from studio_align.router.calibration import agreed_rows, fit_calibration
from studio_align.router.evaluate import errors, evaluate_router_sets
from studio_align.router.prior import PlanPrior, fit_prior
from studio_align.router.report import write_report
from studio_align.router.router import Router
from studio_align.router.settings import PipelineResult, RouterSettings, StageData, StageResult
from studio_align.router.stages import STAGES, mixed_with_sft
from studio_align.training.progress import heartbeat

Log = Callable[[str], None]


def calibrate_stage(
    checkpoint: Path,
    cfg: RouterSettings,
    data: StageData,
    reference: Path | None = None,
    *,
    min_rows: int = 40,
) -> None:
    """Fit temperature, unfamiliarity model and abstain thresholds on validation only (the
    hand-written validation sets `calibration.sets` + generator validation) and save them
    in the checkpoint.

    With `reference` (the SFT router a preference stage started from), only the validation
    rows on which both routers give the same plan are used (`calibration.agreed_rows`; all rows when
    fewer than `min_rows` are kept). Measured over 3 quickstart seeds on hand-written
    validation the served router then abstains on 1-5 % instead of 24-46 %, and its
    selective accuracy where labels and creators agree is 0.92-0.94 (SFT: 0.93-0.94)
    (docs/experiments/router-served-abstention.md). The cost: the rows where the stage
    departs from SFT no longer raise the thresholds, so those plans are served unchecked.
    Plans never change."""
    router = Router.load(checkpoint)
    router.calibration = None
    val = [r for name in cfg.calibration.sets for r in packaged.load(name)] + list(data.val[:80])
    if reference is not None:
        val = agreed_rows(
            router, Router.load(reference), val, batch_size=cfg.eval_batch_size, min_rows=min_rows
        )
    cal = fit_calibration(
        router,
        data.train,
        val,
        target=cfg.calibration.abstain_target,
        unfamiliarity_in_confidence=cfg.calibration.unfamiliarity_in_confidence,
    )
    cal.save(checkpoint)


def prior_stage(
    checkpoint: Path, cfg: RouterSettings, data: StageData, catalog: Catalog, sft: Path | None
) -> None:
    """Give a stage's checkpoint the plan prior (`router.prior`): fitted after SFT on its
    training split, the L2 weight chosen on the generator's validation rows and the packaged
    validation sets; copied from the SFT checkpoint after a later stage, since the prior
    reads only the frozen encoder and the labels. `prior.strength = 0`: no prior."""
    if cfg.prior.strength <= 0:
        return
    if sft is not None:
        prior = PlanPrior.load(sft)
        if prior is not None:
            prior.save(checkpoint)
        return
    val = list(data.val) + [r for name in packaged.VAL_SETS for r in packaged.load(name)]
    p = cfg.prior
    prior = fit_prior(data.train, val, catalog, strength=p.strength, top_k=p.top_k,
                      windows=p.windows, asks=p.asks)  # fmt: skip
    prior.save(checkpoint)


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


def run_stage(
    name: str, out: Path, cfg: RouterSettings, data: StageData, current: Path | None,
    catalog: Catalog, missing: list[str], log: Log, sft: Path | None = None,
) -> StageResult:  # fmt: skip
    """Train stage `name` from `current`, then calibrate and evaluate it; a failure is
    recorded in `missing` (traceback in OUT/<stage>_error.txt), never raised."""
    res = StageResult(stage=name)
    t = time.perf_counter()
    try:
        res.trained = str(STAGES[name](out, cfg, data, current, catalog))
        ckpt = Path(res.trained)
        if name != "sft" and sft is not None:
            ckpt = mixed_with_sft(cfg, sft, ckpt)
    except Exception as e:  # a broken stage must not hide the others' results
        res.status = "failed"
        missing.append(f"{name}: failed ({type(e).__name__}: {e})")
        err = out / f"{name}_error.txt"
        err.write_text(traceback.format_exc(), encoding="utf-8")
        log(f"      {name}: FAILED ({type(e).__name__}: {e}); traceback in {err}")
        return res
    res.seconds = time.perf_counter() - t
    res.checkpoint = str(ckpt)
    t = time.perf_counter()
    try:
        with heartbeat(name, "calibrating and evaluating"):  # a line at least every 20 s
            prior_stage(ckpt, cfg, data, catalog, sft if name != "sft" else None)
            calibrate_stage(ckpt, cfg, data, sft if name != "sft" else None)
            res.figures = evaluate_stage(ckpt, data.eval_sets, cfg.eval_batch_size)
    except Exception as e:  # the checkpoint stays; say why there are no figures
        res.status = "eval failed"
        missing.append(f"{name} evaluation: failed ({type(e).__name__}: {e})")
        (out / f"{name}_eval_error.txt").write_text(traceback.format_exc(), encoding="utf-8")
    res.eval_seconds = time.perf_counter() - t
    log("      " + summary_line(res))
    return res


def finish_run(
    out: Path, summary: dict[str, Any], stages: list[StageResult], missing: list[str],
    router_dir: Path | None, page: Path | None, t0: float, log: Log,
) -> PipelineResult:  # fmt: skip
    """Write OUT/summary.json, print the stage table and where things are (quickstart and
    `train router --logs` end alike)."""
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")
    log("")
    for s in stages:
        log(summary_line(s))
    log(f"total {time.perf_counter() - t0:.0f}s")
    if missing:
        log("NOT RUN: " + "; ".join(missing))
    if router_dir:
        log(f"router checkpoint: {router_dir}")
    if page:
        log(f"report: {page}")
    return PipelineResult(out=out, stages=stages, router=router_dir, report=page, missing=missing)


def write_router_report(
    report_dir: Path,
    stages: list[StageResult],
    data: StageData,
    router_dir: Path,
    cfg: RouterSettings,
    missing: list[str],
    *,
    notes: list[str],
    images: list[tuple[str, Path]] | None = None,
    timings: dict[str, float] | None = None,
    main_set: str = "creators",
    title: str = "studio-align train router --logs",
) -> Path:
    """The final router's report: `main_set` as the main figures, every other evaluation
    set beside it, the pipeline's `notes` (and what was not run) and extra `images`."""
    router = Router.load(router_dir)
    sets = data.eval_sets
    scored = evaluate_router_sets(router, sets, batch_size=cfg.eval_batch_size)
    main, plans, confs = scored[main_set]
    extra = {name: r[0] for name, r in scored.items() if name != main_set}
    notes = list(notes)
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
        extra_images=images or [],
        main_set=main_set,
        timings=[(name, sec) for name, sec in (timings or {}).items()],
    )
