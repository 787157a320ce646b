"""The router's whole loop on the embedded demo data (what `studio-align quickstart` runs).

Stages, each leaving a router checkpoint that `eval router` and `serve router` take:

1. data: the seeded demo generator writes labelled examples (train / val / held-out
   phrasings) and simulated creators write `route` logs; `studio_align.data` validates
   and compiles the logs (DPO pairs from re-routes, KTO samples, endorsed plans), split
   by creator and session;
2. sft: supervised fine-tuning on the labelled examples (`training.sft.train_sft`);
3. dpo: preference tuning on the re-route pairs (`training.dpo.train_dpo`);
4. kto (optional): accepted / abandoned routes as unpaired samples (`training.kto`);
5. grpo: GRPO on the creators' endorsed plans with the plugin rewards
   `intent_accuracy` and `plan_validity` (`training.grpo.train_grpo`);
6. eval + report: after every stage the router is scored on three sets, and the last
   stage's checkpoint becomes `OUT/router/` with an HTML report in `OUT/report/`.

The three evaluation sets answer different questions: *held-out* (labelled plans,
phrasings never trained on) asks whether SFT learned the task; *creators* (preferred
plans of creators never seen in the logs, held-out phrasings) asks whether tuning on
logs moved the router towards what creators actually want; *handwritten*
(`tests/data/handwritten_routing.jsonl`, when the source tree is there) asks whether it
generalises beyond the generator at all.

A stage that fails is reported (traceback in OUT/<stage>_error.txt) and the run
goes on with what exists and says so, rather than failing or pretending.
"""

from __future__ import annotations

import json
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from studio_align.catalog import Catalog
from studio_align.config import Strict
from studio_align.intents import eval as packaged
from studio_align.intents.creators import demo_creator_data, majority_plans
from studio_align.intents.demo import demo_splits, read_examples, write_jsonl

HANDWRITTEN = packaged.path("handwritten_v1")  # package data: an installed wheel has it too

Log = Callable[[str], None]


class QuickstartConfig(Strict):
    """Sizes and steps of the quickstart loop (defaults fit 2 CPU cores in minutes)."""

    seed: int = 0
    n_train: int | None = None  # None: sft_steps * batch_size, every example seen once
    n_val: int = 200
    n_heldout: int = 400
    n_creators: int = 40
    n_eval_creators: int = 12
    vocab_size: int = Field(1024, ge=300)
    # 3 layers, not 2: leave-templates-out validation 0.853 -> 0.890 (docs/router.md)
    model: dict[str, Any] = Field(
        default_factory=lambda: {
            "d_model": 128, "num_layers": 3, "num_heads": 4, "num_kv_heads": 1,
            "head_dim": 32, "d_ff": 512, "max_seq_len": 128,
        }
    )  # fmt: skip
    batch_size: int = 32
    sft_steps: int = 800
    sft_lr: float = 1e-3
    preference: Literal["dpo", "kto", "dpo+kto", "none"] = "dpo"
    dpo_steps: int = 150
    dpo_beta: float = 0.5
    dpo_lr: float = 1e-4
    # RPO: + alpha * NLL of the chosen (creator-preferred) plans; 150 steps at 1e-4 with
    # alpha 2 chosen on the compiled logs' held-out creators (docs/router.md)
    dpo_nll_alpha: float = 2.0
    kto_steps: int = 40
    kto_lr: float = 1e-4
    grpo_steps: int = 50
    grpo_group: int = 8
    grpo_prompts: int = 8
    grpo_lr: float = 1e-4
    grpo_beta: float = 0.0  # KL penalty to the stage's starting router
    eval_batch_size: int = 128
    # abstain thresholds are fitted on validation for this selective accuracy (issue 14)
    abstain_target: float = Field(0.95, gt=0.0, le=1.0)
    grading: bool = True  # also run the colour-grading vertical's demo (reward model + GRPO)


@dataclass
class StageResult:
    stage: str
    status: str = "ok"
    seconds: float = 0.0
    eval_seconds: float = 0.0
    checkpoint: str | None = None
    figures: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        f = self.figures
        nan = float("nan")
        return {
            "stage": self.stage,
            "status": self.status,
            "seconds": round(self.seconds, 1),
            "eval_seconds": round(self.eval_seconds, 1),
            "heldout_exact": f.get("heldout", {}).get("exact_plan_accuracy", nan),
            "creator_agreement": f.get("creators", {}).get("exact_plan_accuracy", nan),
            "handwritten_exact": f.get("handwritten", {}).get("exact_plan_accuracy", nan),
            "handwritten_v2_exact": f.get("handwritten_v2", {}).get("exact_plan_accuracy", nan),
            "handwritten_v2_ece": f.get("handwritten_v2", {}).get("ece", nan),
            "heldout_majority_exact": f.get("heldout_majority", {}).get("exact_plan_accuracy", nan),
            "handwritten_majority_exact": f.get("handwritten_majority", {}).get(
                "exact_plan_accuracy", nan
            ),
            "validity_rate": min(
                (v["validity_rate"] for v in f.values() if "validity_rate" in v), default=nan
            ),
            "checkpoint": self.checkpoint,
        }


@dataclass
class PipelineResult:
    out: Path
    stages: list[StageResult]
    router: Path | None
    report: Path | None
    missing: list[str]


# -- data ----------------------------------------------------------------------------------------


def prepare_data(out: Path, cfg: QuickstartConfig, catalog: Catalog) -> dict[str, Any]:
    """Write the demo data and compile the creator logs; returns paths and eval sets."""
    from studio_align.data.compile import compile_logs

    d = out / "data"
    n_train = cfg.n_train or cfg.sft_steps * cfg.batch_size
    splits = demo_splits(seed=cfg.seed, n_train=n_train, n_val=cfg.n_val, n_heldout=cfg.n_heldout)
    for name, rows in splits.items():
        write_jsonl(d / f"{name}.jsonl", rows)
    creators = demo_creator_data(
        seed=cfg.seed, n_train_creators=cfg.n_creators, n_eval_creators=cfg.n_eval_creators
    )
    logs = write_jsonl(d / "creator_logs.jsonl", creators["route_logs"])
    write_jsonl(d / "creators_eval.jsonl", creators["eval_preferred"])
    compiled = d / "compiled"
    if compiled.exists():
        shutil.rmtree(compiled)
    result = compile_logs([logs], compiled, seed=cfg.seed, catalog=catalog, check_images=False)
    sets = {"heldout": splits["heldout"], "creators": creators["eval_preferred"]}
    if HANDWRITTEN.exists():
        sets["handwritten"] = read_examples(HANDWRITTEN)
        sets["handwritten_v2"] = packaged.load("handwritten_v2")
    # the same requests against the majority creator's preferred plan (see majority_plans)
    for name in ("heldout", "handwritten", "handwritten_v2"):
        if name in sets:
            sets[f"{name}_majority"] = majority_plans(sets[name], catalog)
    return {
        "splits": splits,
        "compiled": compiled,
        "eval_sets": sets,
        "counts": getattr(result, "counts", None) or _manifest_counts(compiled),
    }


def _manifest_counts(compiled: Path) -> dict[str, Any]:
    try:
        return json.loads((compiled / "manifest.json").read_text(encoding="utf-8")).get(
            "counts", {}
        )
    except (OSError, json.JSONDecodeError):
        return {}


# -- stages --------------------------------------------------------------------------------------


def _run_cfg(cfg: QuickstartConfig, run_dir: Path, steps: int, lr: float) -> dict[str, Any]:
    return {
        "run_dir": run_dir,
        "train": {"steps": steps, "batch_size": cfg.batch_size, "seed": cfg.seed, "log_every": 20},
        "optim": {"learning_rate": lr, "warmup_steps": min(20, steps // 10)},
        "checkpoint": {"every": 0, "resume": False, "async_save": False},
    }


def stage_sft(out: Path, cfg: QuickstartConfig, data: dict[str, Any], catalog: Catalog) -> Path:
    from studio_align.training.sft import SFTConfig, train_sft

    sc = SFTConfig.model_validate(
        {
            **_run_cfg(cfg, out / "stages" / "sft", cfg.sft_steps, cfg.sft_lr),
            "model": {"preset": "router", "config": cfg.model},
            "data": {"vocab_size": cfg.vocab_size},
        }
    )
    res = train_sft(
        sc, examples=data["splits"]["train"], heldout=data["splits"]["val"], catalog=catalog
    )
    return Path(res.checkpoint)


def stage_dpo(out: Path, cfg: QuickstartConfig, data: dict[str, Any], start: Path) -> Path:
    from studio_align.training.dpo import DPORunConfig, train_dpo

    rc = DPORunConfig.model_validate(
        {
            **_run_cfg(cfg, out / "stages" / "dpo", cfg.dpo_steps, cfg.dpo_lr),
            "model": {"init_from": start},
            "data": {"dir": data["compiled"]},
            "dpo": {"beta": cfg.dpo_beta, "nll_alpha": cfg.dpo_nll_alpha},
        }
    )
    return Path(train_dpo(rc).checkpoint)


def stage_kto(out: Path, cfg: QuickstartConfig, data: dict[str, Any], start: Path) -> Path:
    from studio_align.training.kto import KTORunConfig, train_kto

    rc = KTORunConfig.model_validate(
        {
            **_run_cfg(cfg, out / "stages" / "kto", cfg.kto_steps, cfg.kto_lr),
            "model": {"init_from": start},
            "data": {"dir": data["compiled"]},
        }
    )
    return Path(train_kto(rc).checkpoint)


def stage_grpo(out: Path, cfg: QuickstartConfig, data: dict[str, Any], start: Path) -> Path:
    from studio_align.training.grpo import GRPORunConfig, train_grpo

    rc = GRPORunConfig.model_validate(
        {
            "run_dir": out / "stages" / "grpo",
            "model": {"init_from": start},
            "data": {"dir": data["compiled"]},
            "grpo": {
                "steps": cfg.grpo_steps,
                "group_size": cfg.grpo_group,
                "prompts_per_step": cfg.grpo_prompts,
                "seed": cfg.seed,
                "beta": cfg.grpo_beta,
            },
            "optim": {"learning_rate": cfg.grpo_lr, "decay": "constant"},
            "rewards": {"intent_accuracy": 1.0, "plan_validity": 0.5},
        }
    )
    return Path(train_grpo(rc).checkpoint)


# -- evaluation ----------------------------------------------------------------------------------


def calibrate_stage(checkpoint: Path, cfg: QuickstartConfig, data: dict[str, Any]) -> None:
    """Fit temperature, unfamiliarity model and abstain thresholds on validation only (the
    hand-written validation set + generator validation) and save them in the checkpoint."""
    from studio_align.intents.calibration import fit_calibration
    from studio_align.intents.router import Router

    router = Router.load(checkpoint)
    router.calibration = None
    val = packaged.load("handwritten_val") + list(data["splits"]["val"][:80])
    cal = fit_calibration(router, data["splits"]["train"], val, target=cfg.abstain_target)
    cal.save(checkpoint)


def evaluate_stage(
    checkpoint: Path, sets: dict[str, list[dict[str, Any]]], batch_size: int
) -> dict[str, Any]:
    from studio_align.intents.evaluate import evaluate_router
    from studio_align.intents.router import Router

    router = Router.load(checkpoint)
    return {
        name: evaluate_router(router, rows, batch_size=batch_size)[0] for name, rows in sets.items()
    }


def _fmt(v: float) -> str:
    return "  -  " if v != v else f"{v:.3f}"


def _summary_line(r: StageResult) -> str:
    row = r.row()
    return (
        f"{r.stage:<6} {r.status:<10} train {row['seconds']:>6.1f}s  eval {row['eval_seconds']:>5.1f}s  "
        f"held-out {_fmt(row['heldout_exact'])}  creators {_fmt(row['creator_agreement'])}  "
        f"handwritten {_fmt(row['handwritten_exact'])}  v2 {_fmt(row['handwritten_v2_exact'])} "
        f"(ECE {_fmt(row['handwritten_v2_ece'])})  valid {_fmt(row['validity_rate'])}  "
        f"(majority preference: held-out {_fmt(row['heldout_majority_exact'])}, "
        f"handwritten {_fmt(row['handwritten_majority_exact'])})"
    )


def run_pipeline(
    out: str | Path,
    cfg: QuickstartConfig | None = None,
    *,
    catalog: Catalog | None = None,
    log: Log = print,
) -> PipelineResult:
    """Run every stage (see module docstring) into `out`; never raises for a missing stage."""
    cfg = cfg or QuickstartConfig()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if catalog is None:
        from studio_align.plugins import get_host

        catalog = get_host().catalog
    t0 = time.perf_counter()
    plan = ["sft"]
    if cfg.preference in ("dpo", "dpo+kto"):
        plan.append("dpo")
    if cfg.preference in ("kto", "dpo+kto"):
        plan.append("kto")
    if cfg.grpo_steps > 0:
        plan.append("grpo")
    total = len(plan) + 2 + int(cfg.grading)
    log(f"[1/{total}] data: generating demo requests and creator logs ...")
    t = time.perf_counter()
    data = prepare_data(out, cfg, catalog)
    n_logs = len(read_examples_safe(out / "data" / "creator_logs.jsonl"))
    if "handwritten" not in data["eval_sets"]:
        log(f"      (no source tree: {HANDWRITTEN} not found, handwritten set not evaluated)")
    log(
        f"      {len(data['splits']['train'])} labelled train, {len(data['splits']['heldout'])} held-out, "
        f"{n_logs} route events from {cfg.n_creators} creators, compiled in {time.perf_counter() - t:.1f}s"
    )
    stages: list[StageResult] = []
    missing: list[str] = []
    current: Path | None = None
    runners: dict[str, Callable[[], Path]] = {
        "sft": lambda: stage_sft(out, cfg, data, catalog),
        "dpo": lambda: stage_dpo(out, cfg, data, current),  # type: ignore[arg-type]
        "kto": lambda: stage_kto(out, cfg, data, current),  # type: ignore[arg-type]
        "grpo": lambda: stage_grpo(out, cfg, data, current),  # type: ignore[arg-type]
    }
    for i, name in enumerate(plan, start=2):
        res = StageResult(stage=name)
        if name != "sft" and current is None:
            res.status = "skipped"
            missing.append(f"{name}: skipped (no SFT checkpoint to start from)")
            stages.append(res)
            log(f"[{i}/{total}] {name}: skipped, nothing to start from")
            continue
        log(f"[{i}/{total}] {name}: training ...")
        t = time.perf_counter()
        try:
            ckpt = runners[name]()
        except Exception as e:  # a broken stage must not hide the others' results
            res.status = "failed"
            missing.append(f"{name}: failed ({type(e).__name__}: {e})")
            (out / f"{name}_error.txt").write_text(traceback.format_exc(), encoding="utf-8")
            log(
                f"      {name}: FAILED ({type(e).__name__}: {e}); traceback in {out / f'{name}_error.txt'}"
            )
            stages.append(res)
            continue
        res.seconds = time.perf_counter() - t
        res.checkpoint = str(ckpt)
        current = ckpt
        t = time.perf_counter()
        try:
            calibrate_stage(ckpt, cfg, data)
            res.figures = evaluate_stage(ckpt, data["eval_sets"], cfg.eval_batch_size)
        except Exception as e:  # the checkpoint stays; say why there are no figures
            res.status = "eval failed"
            missing.append(f"{name} evaluation: failed ({type(e).__name__}: {e})")
            (out / f"{name}_eval_error.txt").write_text(traceback.format_exc(), encoding="utf-8")
        res.eval_seconds = time.perf_counter() - t
        stages.append(res)
        log("      " + _summary_line(res))

    grading: dict[str, Any] | None = None
    if cfg.grading:
        grading = run_grading(out, cfg, log, missing)

    log(f"[{total}/{total}] report ...")
    router_dir: Path | None = None
    page: Path | None = None
    if current is not None:
        router_dir = out / "router"
        if router_dir.exists():
            shutil.rmtree(router_dir)
        shutil.copytree(current, router_dir)
        try:
            page = write_pipeline_report(
                out / "report", stages, data, router_dir, cfg, missing, grading=grading
            )
        except Exception as e:
            missing.append(f"report: failed ({type(e).__name__}: {e})")
            (out / "report_error.txt").write_text(traceback.format_exc(), encoding="utf-8")
    (out / "summary.json").write_text(
        json.dumps(
            {
                "stages": [s.row() for s in stages],
                "missing": missing,
                "seconds": time.perf_counter() - t0,
                "router": str(router_dir) if router_dir else None,
                "figures": {s.stage: s.figures for s in stages},
                "grading": grading,
            },
            indent=1,
            default=str,
        ),
        encoding="utf-8",
    )
    log("")
    for s in stages:
        log(_summary_line(s))
    log(f"total {time.perf_counter() - t0:.0f}s")
    if missing:
        log("NOT RUN: " + "; ".join(missing))
    if router_dir:
        log(f"router checkpoint: {router_dir}")
    if page:
        log(f"report: {page}")
    return PipelineResult(out=out, stages=stages, router=router_dir, report=page, missing=missing)


def run_grading(
    out: Path, cfg: QuickstartConfig, log: Log, missing: list[str]
) -> dict[str, Any] | None:
    """The grading vertical's own demo loop (issue: aesthetic alignment), if present."""
    log("[grading] reward model from selections + GRPO colour grading ...")
    t = time.perf_counter()
    try:
        from studio_align.verticals.grading.demo import run_grading_demo

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


def read_examples_safe(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_pipeline_report(
    report_dir: Path,
    stages: list[StageResult],
    data: dict[str, Any],
    router_dir: Path,
    cfg: QuickstartConfig,
    missing: list[str],
    *,
    grading: dict[str, Any] | None = None,
) -> Path:
    """The final router's report (creators' preferred plans as the main set)."""
    from studio_align.intents.evaluate import errors, evaluate_router
    from studio_align.intents.report import write_report
    from studio_align.intents.router import Router

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
    )
