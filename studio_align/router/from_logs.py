"""`train router --logs`: the quickstart's loop on a platform's own raw logs.

Steps, numbered as printed (`[i/n]`):

1. data: the logs are validated and compiled (`data.compile_logs`, split by creator and
   session); invalid lines go to `OUT/quarantine/invalid.jsonl`, counted and reported,
   never dropped silently. Labelled routing examples are the logs' own (an accepted plan,
   a re-route's final plan) plus any `examples` files;
2. the router stages of the quickstart (`stages.STAGES`, the same run-config builders and
   the same defaults, `RouterSettings`): SFT where labelled examples exist (from
   scratch, from `init_from` or from a Hugging Face `base`), then DPO / KTO / GRPO from
   the route events, each calibrated on validation and scored after it;
3. report: the last stage's checkpoint becomes `OUT/router/`, with `OUT/report/`.

Design choices:
- Every setting, inputs included, is one config (`FromLogsConfig`: the quickstart's router
  settings, one table per stage, plus the inputs) written to `OUT/config.toml` with
  absolute paths before anything trains, so `--config OUT/config.toml` reruns the same
  run from anywhere.
- Evaluation sets: `creators` is the logs' held-out split (plans creators kept, on
  sessions never trained on) unless an `eval` file of that name is given (then the logs'
  held-out split is `logs_heldout`); the hand-written sets shipped with the package are
  always scored. Validation (SFT's held-out loss, calibration) is `val` files, else a
  seeded tenth (at most 200) of the labelled examples set aside before SFT: evaluation
  sets never select settings.
- The figures are the logs' own plans and the hand-written sets; no set is relabelled by a
  simulated creator (the quickstart's `*_majority` sets are the simulator's, not a platform's).
- Bad input (a missing path, no valid event, nothing to start from) raises a
  `StudioAlignError` before any training, which the CLI prints as one line.
"""

from __future__ import annotations

import random
import shutil
import time
import traceback
from pathlib import Path
from typing import Any

from studio_align.catalog import Catalog
from studio_align.config import dump_toml
from studio_align.data.compile import compile_logs
from studio_align.data.paths import expand_log_paths
from studio_align.errors import ConfigError, DataError
from studio_align.plugins import get_host
from studio_align.router import eval as packaged
from studio_align.router.data import read_examples
from studio_align.router.settings import FromLogsConfig, PipelineResult, StageData, StageResult
from studio_align.router.stage_run import Log, finish_run, run_stage, write_router_report
from studio_align.router.stages import stage_plan
from studio_align.training.progress import heartbeat

# which compiled record each stage trains on (RouterTask.record_kinds)
_NEEDS = {"sft": "routing_examples", "dpo": "route_dpo_pairs", "kto": "kto_samples",
          "grpo": "routing_examples"}  # fmt: skip
MAX_VAL = 200


def absolute(cfg: FromLogsConfig) -> FromLogsConfig:
    """`cfg` with every path made absolute, so its TOML reruns from any directory."""

    def a(p: Path) -> Path:
        return p.expanduser().resolve()

    return cfg.model_copy(
        update={
            "logs": [a(p) for p in cfg.logs],
            "examples": [a(p) for p in cfg.examples],
            "val": [a(p) for p in cfg.val],
            "eval": {k: a(p) for k, p in cfg.eval.items()},
            "base": a(cfg.base) if cfg.base else None,
            "init_from": a(cfg.init_from) if cfg.init_from else None,
        }
    )


def _read_labelled(paths: list[Path], catalog: Catalog) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for p in paths:
        if not p.is_file():
            raise DataError(f"{p}: no such labelled-examples file")
        rows.extend(read_examples(p, catalog))
    return rows


def _check_start(cfg: FromLogsConfig) -> None:
    for key in ("base", "init_from"):
        p = getattr(cfg, key)
        if p is not None and not p.is_dir():
            raise ConfigError(f"{key}: {p} is not a directory")
    if cfg.base is not None and cfg.init_from is not None:
        raise ConfigError("give base or init_from, not both")


def prepare_log_data(
    out: Path, cfg: FromLogsConfig, catalog: Catalog
) -> tuple[StageData, dict[str, Any]]:
    """Validate and compile the logs into OUT/compiled (invalid lines quarantined), gather
    the labelled examples, validation and evaluation sets; returns (data, counts)."""
    compiled, quarantine = out / "compiled", out / "quarantine" / "invalid.jsonl"
    own = {compiled.resolve(), quarantine.parent.resolve()}
    paths = [
        p for p in expand_log_paths(cfg.logs, exclude=quarantine)
        if not any(p.resolve().is_relative_to(o) for o in own)
    ]  # fmt: skip
    extra_train = _read_labelled(cfg.examples, catalog)
    val = _read_labelled(cfg.val, catalog)
    evals = {name: _read_labelled([p], catalog) for name, p in cfg.eval.items()}
    if compiled.exists():
        shutil.rmtree(compiled)
    quarantine.parent.mkdir(parents=True, exist_ok=True)
    quarantine.unlink(missing_ok=True)
    res = compile_logs(
        paths, compiled, seed=cfg.seed, heldout_fraction=cfg.heldout_fraction, catalog=catalog,
        check_images=cfg.check_images, quarantine=quarantine,
    )  # fmt: skip
    lines, records = res.manifest["lines"], res.manifest["records"]
    if not lines["valid"]:
        where = f"; {lines['invalid']} invalid line(s) in {quarantine}" if lines["invalid"] else ""
        raise DataError(f"no valid events in {len(paths)} log file(s){where}")
    if not quarantine.exists() or not quarantine.stat().st_size:
        quarantine.unlink(missing_ok=True)
    log_train = read_examples(compiled / "train" / "routing_examples.jsonl")
    train = (log_train if cfg.log_examples else []) + extra_train
    if not val and train:  # a seeded tenth, set aside before SFT sees it
        order = list(range(len(train)))
        random.Random(cfg.seed).shuffle(order)
        held = set(order[: min(MAX_VAL, len(train) // 10)])
        val = [r for i, r in enumerate(train) if i in held]
        train = [r for i, r in enumerate(train) if i not in held]
    log_heldout = read_examples(compiled / "heldout" / "routing_examples.jsonl")
    sets: dict[str, list[dict[str, Any]]] = {}
    if log_heldout:
        sets["creators" if "creators" not in evals else "logs_heldout"] = log_heldout
    sets.update(evals)
    sets["handwritten"] = packaged.load("handwritten_v1")
    sets["handwritten_v2"] = packaged.load("handwritten_v2")
    counts = {
        "log_files": len(paths),
        "lines": lines,
        "events": res.manifest["events"],
        "quarantine": str(quarantine) if lines["invalid"] else None,
        "records": {k: v["train"] for k, v in records.items()},
        "labelled": {"train": len(train), "val": len(val)},
    }
    data = StageData(train=train, val=val, compiled=compiled, eval_sets=sets, base=cfg.base)
    return data, counts


def _plan(cfg: FromLogsConfig, counts: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The stages to run and the ones skipped for want of records (with the reason)."""
    wanted = stage_plan(cfg)
    # labelled examples are the logs' and --examples' together (after validation is set aside)
    have = {**counts["records"], "routing_examples": counts["labelled"]["train"]}
    run = [s for s in wanted if have.get(_NEEDS[s], 0) > 0 and (s != "sft" or cfg.sft.steps > 0)]
    skipped = [f"{s}: skipped (no {_NEEDS[s]} in the logs)" for s in wanted if s not in run]
    if "sft" not in run and cfg.init_from is None and cfg.base is None:
        raise DataError(
            "no labelled routing examples (accepted or re-routed route events, or --examples) "
            "to train a router from; give --base HF_DIR or --init-from ROUTER_DIR"
        )
    return run, skipped


def train_router_from_logs(
    out: str | Path, cfg: FromLogsConfig, *, catalog: Catalog | None = None, log: Log = print
) -> PipelineResult:
    """Run every step (see module docstring) into `out`. Bad input raises before training;
    a failed stage is reported in the result's `missing`, the others still run."""
    out = Path(out)
    cfg = absolute(cfg)
    _check_start(cfg)
    catalog = catalog if catalog is not None else get_host().catalog
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.toml").write_text(dump_toml(cfg), encoding="utf-8")
    t0 = time.perf_counter()
    with heartbeat("data", "validating and compiling the logs"):
        data, counts = prepare_log_data(out, cfg, catalog)
    plan, missing = _plan(cfg, counts)
    total = 1 + len(plan) + 1
    lines, rec = counts["lines"], counts["records"]
    log(f"[1/{total}] data: {lines['valid']} valid events from {counts['log_files']} file(s) "
        f"compiled in {time.perf_counter() - t0:.1f}s")  # fmt: skip
    if lines["invalid"]:
        log(f"      {lines['invalid']} invalid line(s) quarantined to {counts['quarantine']}")
    log(f"      train: {counts['labelled']['train']} labelled examples, "
        f"{rec['route_dpo_pairs']} re-route pairs, {rec['kto_samples']} KTO samples; "
        f"validation {counts['labelled']['val']}; evaluation sets: "
        + ", ".join(f"{k} ({len(v)})" for k, v in data.eval_sets.items()))  # fmt: skip
    timings = {"data": time.perf_counter() - t0}
    stages: list[StageResult] = []
    current: Path | None = cfg.init_from  # what the next stage trains from
    delivered: Path | None = None  # the last stage's router (mixed back: tuned_weight)
    sft: Path | None = cfg.init_from  # what preference stages are mixed back towards
    for i, name in enumerate(plan, start=2):
        log(f"[{i}/{total}] {name}: training ...")
        if (out / "stages" / name).exists():  # a rerun into OUT starts the stage afresh
            shutil.rmtree(out / "stages" / name)
        res = run_stage(name, out, cfg, data, current, catalog, missing, log, sft)
        stages.append(res)
        if res.trained is not None:
            current = Path(res.trained)  # the next stage trains from the unmixed router
            delivered = Path(res.checkpoint or res.trained)
            if name == "sft":
                sft = current
    log(f"[{total}/{total}] report ...")
    router_dir = page = None
    if delivered is not None:
        router_dir = out / "router"
        if router_dir.exists():
            shutil.rmtree(router_dir)
        shutil.copytree(delivered, router_dir)
        intro = [
            f"Main figures: the final router ({stages[-1].stage}) against `creators`: "
            + ("the given evaluation file." if "creators" in cfg.eval else
               "the plans creators kept (accepted, or re-routed to) on held-out sessions "
               "of the logs, never trained on."),
            f"Logs: {lines['valid']} valid events, {lines['invalid']} quarantined; "
            f"settings in {out / 'config.toml'}.",
        ]  # fmt: skip
        main_set = "creators" if "creators" in data.eval_sets else "handwritten_v2"
        try:
            with heartbeat("report", "scoring the final router and drawing the report"):
                page = write_router_report(
                    out / "report", stages, data, router_dir, cfg, missing, timings=timings,
                    main_set=main_set, title="studio-align train router --logs", notes=intro,
                )  # fmt: skip
        except Exception as e:  # the router is saved; say why there is no report
            missing.append(f"report: failed ({type(e).__name__}: {e})")
            (out / "report_error.txt").write_text(traceback.format_exc(), encoding="utf-8")
    else:
        missing.append("router: no stage trained a checkpoint")
    summary = {
        "stages": [s.row() for s in stages],
        "missing": missing,
        "seconds": time.perf_counter() - t0,
        "router": str(router_dir) if router_dir else None,
        "data": counts,
        "figures": {s.stage: s.figures for s in stages},
    }
    return finish_run(out, summary, stages, missing, router_dir, page, t0, log)
