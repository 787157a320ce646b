"""The whole loop on the embedded demo data (what `studio-align quickstart` runs).

Steps, numbered as printed (`[i/n]`), each leaving what a user would get by hand:

1. data: the seeded demo generator writes labelled examples (train / val / held-out
   phrasings) and simulated creators write `route` logs; `studio_align.data` validates
   and compiles the logs (DPO pairs from re-routes, KTO samples, endorsed plans), split
   by creator and session;
2. the router stages (`stages.STAGES`): sft, then dpo and/or kto, then grpo, each from
   the real run config a user would write (saved in `stages/<stage>/config.toml`);
3. grading (optional): the colour-grading vertical through the files a platform exports
   (`quickstart.grading`: demo photos + JSONL logs, `train grading`, `eval grading`);
3b. flow (optional, `quickstart/flow.py`): the packaged flow generator aligned to
   simulated creators, a before/after grid per creator;
4. report: the last stage's checkpoint becomes `OUT/router/`, with `OUT/report/`.

Steps 3 and 3b read nothing that step 2 writes, so they run in a thread beside it
(`QuickstartConfig.concurrent`; JAX and numpy release the GIL while they compute). One
after another the whole run kept 1.45 of two cores busy and took 630 s (seed 0); beside
each other, 1.88 and 499 s, every figure the same. Only the stages' seconds, which then
overlap, differ.

After every router stage the router is scored on the evaluation sets: *held-out*
(labelled plans, phrasings never trained on: did SFT learn the task), *creators*
(preferred plans of creators never seen in the logs: did tuning on logs move the router
towards what creators want) and the hand-written sets shipped in `router/eval/`
(does it generalise beyond the generator at all).

A stage that fails is reported (traceback in OUT/<stage>_error.txt) and the run goes on
with what exists and says so, rather than failing or pretending.
"""

from __future__ import annotations

import shutil
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from studio_align.catalog import Catalog
from studio_align.plugins import get_host
from studio_align.quickstart.config import (
    PipelineResult,
    QuickstartConfig,
    StageData,
    StageResult,
)
from studio_align.quickstart.flow import run_flow
from studio_align.quickstart.grading import run_grading
from studio_align.quickstart.report import write_pipeline_report
from studio_align.router.stage_run import Log, finish_run, run_stage
from studio_align.router.stages import stage_plan
from studio_align.simulate.router.platform import simulate_platform
from studio_align.training.progress import heartbeat


def _count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


def run_quickstart(
    out: str | Path,
    cfg: QuickstartConfig | None = None,
    *,
    catalog: Catalog | None = None,
    log: Log = print,
) -> PipelineResult:
    """Run every step (see module docstring) into `out`; never raises for a failed stage."""
    cfg = cfg or QuickstartConfig()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    catalog = catalog if catalog is not None else get_host().catalog
    t0 = time.perf_counter()
    plan = stage_plan(cfg)
    total = 1 + len(plan) + int(cfg.grading) + int(cfg.flow) + 1
    log(f"[1/{total}] data: generating demo requests and creator logs ...")
    t = time.perf_counter()
    with heartbeat("data", "generating and compiling"):
        platform = simulate_platform(
            out,
            catalog,
            seed=cfg.seed,
            n_train=cfg.n_train or cfg.sft.steps * cfg.sft.batch_size,
            n_val=cfg.n_val,
            n_heldout=cfg.n_heldout,
            n_creators=cfg.n_creators,
            n_eval_creators=cfg.n_eval_creators,
        )
    splits = platform["splits"]
    data = StageData(
        train=splits["train"],
        val=splits["val"],
        compiled=platform["compiled"],
        eval_sets=platform["eval_sets"],
    )
    timings = {"data": time.perf_counter() - t}
    n_logs = _count_lines(out / "data" / "creator_logs.jsonl")
    log(
        f"      {len(data.train)} labelled train, {len(splits['heldout'])} "
        f"held-out, {n_logs} route events from {cfg.n_creators} creators, compiled in "
        f"{time.perf_counter() - t:.1f}s"
    )
    stages: list[StageResult] = []
    missing: list[str] = []
    # the verticals' thread, beside the router stages (module docstring)
    side_missing: list[str] = []  # the thread writes its own list
    verticals: dict[str, Any] = {}
    side = threading.Thread(
        target=lambda: verticals.update(run_verticals(out, cfg, log, side_missing, total)),
        name="verticals", daemon=True,  # Ctrl-C stops the run without waiting for it
    )  # fmt: skip
    side.start()
    if not cfg.concurrent:
        side.join()  # the verticals first, then the router stages, one at a time
    current: Path | None = None  # what the next stage starts from
    delivered: Path | None = None  # the last stage's router (mixed with SFT: tuned_weight)
    sft: Path | None = None
    for i, name in enumerate(plan, start=2):
        if name != "sft" and current is None:
            stages.append(StageResult(stage=name, status="skipped"))
            missing.append(f"{name}: skipped (no SFT checkpoint to start from)")
            log(f"[{i}/{total}] {name}: skipped, nothing to start from")
            continue
        log(f"[{i}/{total}] {name}: training ...")
        res = run_stage(name, out, cfg, data, current, catalog, missing, log, sft)
        stages.append(res)
        if res.trained is not None:
            current = Path(res.trained)  # the next stage trains from the unmixed router
            delivered = Path(res.checkpoint or res.trained)
            if name == "sft":
                sft = current

    side.join()
    missing.extend(side_missing)
    flow, grading = verticals.get("flow"), verticals.get("grading")
    beside = " (beside the router stages)" if cfg.concurrent else ""
    for name, part in (("flow vertical", flow), ("grading vertical", grading)):
        if part is not None:
            timings[name + beside] = float(part["seconds"])

    log(f"[{total}/{total}] report ...")
    router_dir: Path | None = None
    page: Path | None = None
    if delivered is not None:
        router_dir = out / "router"
        if router_dir.exists():
            shutil.rmtree(router_dir)
        shutil.copytree(delivered, router_dir)
        try:
            with heartbeat("report", "scoring the final router and drawing the report"):
                page = write_pipeline_report(
                    out / "report", stages, data, router_dir, cfg, missing, grading=grading,
                    timings=timings, flow=flow,
                )  # fmt: skip
        except Exception as e:
            missing.append(f"report: failed ({type(e).__name__}: {e})")
            (out / "report_error.txt").write_text(traceback.format_exc(), encoding="utf-8")
    summary = {
        "stages": [s.row() for s in stages],
        "missing": missing,
        "seconds": time.perf_counter() - t0,
        "router": str(router_dir) if router_dir else None,
        "figures": {s.stage: s.figures for s in stages},
        "grading": grading,
        "flow": flow,
    }
    return finish_run(out, summary, stages, missing, router_dir, page, t0, log)


def run_verticals(
    out: Path, cfg: QuickstartConfig, log: Log, missing: list[str], total: int
) -> dict[str, dict[str, Any] | None]:
    """The flow then the grading vertical (each optional): `{"flow": report, "grading":
    report}`, None for one that is off or failed; a failure is recorded in `missing`, never
    raised."""
    flow: dict[str, Any] | None = None
    if cfg.flow:
        step = total - 1 - int(cfg.grading)
        log(f"[{step}/{total}] flow: creators select, Flow-GRPO aligns the generator ...")
        flow = run_flow(out, cfg, log, missing)
    grading: dict[str, Any] | None = None
    if cfg.grading:
        log(
            f"[{total - 1}/{total}] grading: demo platform files -> train grading -> eval grading ..."
        )
        grading = run_grading(out, cfg, log, missing)
    return {"flow": flow, "grading": grading}
