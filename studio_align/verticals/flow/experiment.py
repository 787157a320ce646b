"""The flow vertical's end-to-end loop: creators select, a reward model learns, the
generator aligns, and the result is measured against each creator's judge.

`run_seed` for one seed:
1. a selection round (`collect`, a `Collect`): the base model's candidates are shown to
   the creators, whose picks come back as selection logs in the docs/design.md format
   with the candidates and picks (the demo's round is
   `simulate.flow.selections.collect_selections`, simulated creators picking);
2. `reward_models.train.train_reward` fits a Bradley-Terry model with per-creator heads
   over the `flow-composition` encoder on those logs (creator/session split, gate);
3. per creator, Flow-GRPO against the `aesthetic` reward (that model, the creator's head;
   optionally `flow_diversity`) and/or Diffusion-DPO on the creator's own selection
   pairs, both from the base model;
4. `evaluate.compare` on training and held-out tag sets under `judge`, a reward taken
   by name from the plugin host (the demo's: `flow_taste`, the simulated creators'
   hidden taste, which this module never sees).

`quickstart_stage` is the short version the quickstart runs: one seed, Flow-GRPO only,
and a labelled before/after grid per creator (`before_after_sheet`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from studio_align.reward_models.color_stats import color_features
from studio_align.reward_models.scorer import AestheticScorer
from studio_align.reward_models.train import RewardTrainConfig, train_reward
from studio_align.verticals.contact_sheet import contact_sheet, save_sheet
from studio_align.verticals.flow.align import (
    FlowDPOConfig,
    FlowGRPOConfig,
    dpo_pairs,
    flow_dpo,
    flow_grpo,
)
from studio_align.verticals.flow.checkpoint import BASE_WEIGHTS, clone, load_flow, save_flow
from studio_align.verticals.flow.data import label, make_dataset
from studio_align.verticals.flow.evaluate import (
    TRAIN_TAG_SETS,
    FeatureScale,
    compare,
    conditions,
    diversity,
    frechet_distance,
    generate,
)
from studio_align.verticals.flow.guards import (
    ClippedScorer,
    ColourAnchor,
    GuardConfig,
    ceiling_from,
)


class Collect(Protocol):
    """A selection round: `base`'s candidates shown to `creators`, their picks logged
    under `out`. Returns `log` (the selections JSONL), `candidates` [E, K, H, W, 3] in
    [0, 1], `picks` {creator: [E] chosen index} and the events' `verticals` and `tags`."""

    def __call__(
        self, base: Any, out: Path, creators: Sequence[str], *, seed: int
    ) -> dict[str, Any]: ...


def fit_reward(log: Path, out: Path, *, seed: int, host: Any) -> tuple[AestheticScorer, dict]:
    cfg = RewardTrainConfig.model_validate(
        {
            "logs": [str(log)], "out": str(out), "seed": seed, "heldout_fraction": 0.34,
            "encoder": {"name": "flow-composition", "max_side": 64},
            "head": {"hidden": 0, "per_creator": True},
            "train": {"steps": 300, "learning_rate": 3e-3, "weight_decay": 1e-2},
            "gate": {"min_heldout_accuracy": 0.55},
        }
    )  # fmt: skip
    report = train_reward(cfg, host=host)
    return AestheticScorer.load(out, host=host), report


def prepare(root: Path, *, seed: int, host: Any, collect: Collect, creators: Sequence[str],
            base_path: str | Path = BASE_WEIGHTS) -> dict[str, Any]:  # fmt: skip
    """Steps 1-2 for one seed: base model, selections, reward model, FD reference."""
    base, _ = load_flow(base_path)
    sel = collect(base, root / "logs", list(creators), seed=seed)
    scorer, rm = fit_reward(sel["log"], root / "reward", seed=seed, host=host)
    data = make_dataset(1024, seed=0)[0].astype(np.float32) / 255.0  # pretraining draws
    return {"base": base, "creators": list(creators), "sel": sel, "scorer": scorer, "rm": rm,
            "data": data, "anchor": ColourAnchor(data)}  # fmt: skip


def chosen_images(prep: dict[str, Any], creator: str) -> np.ndarray:
    """The candidates `creator` picked, one per selection event [E, H, W, 3]."""
    sel = prep["sel"]
    return sel["candidates"][np.arange(len(sel["candidates"])), sel["picks"][creator]]


def taste_fd_ratio(prep: dict[str, Any], creator: str) -> float:
    """FD to the pretraining data of the creator's picks over that of a fixed pick (the
    first candidate) of the same events: how far the taste itself sits from the pretraining
    colour statistics, at equal sample size. A model that produced exactly what the creator
    picks would have about this FD ratio, so it is the honest scale for `fd/ratio`."""
    feats = color_features(prep["data"])
    picked = frechet_distance(color_features(chosen_images(prep, creator)), feats)
    first = frechet_distance(color_features(prep["sel"]["candidates"][:, 0]), feats)
    return picked / first


# the quickstart's guards: the validated defaults (docs/experiments/flow-quickstart-stage-timing.md)
QUICKSTART_GUARDS = GuardConfig()
STOP_NOISE = 4242  # validation noise of the early-stopping check (evaluation uses 1234)


def quality_stop(prep: dict[str, Any], guards: GuardConfig, creator: str | None = None) -> Any:
    """Early-stopping check on validation noise: FD / diversity ratios against the base,
    and with `guards.stop_reward` the `creator`'s reward-model score against the base's."""
    by_reward = guards.stop_reward and creator is not None
    if guards.stop_fd_ratio is None and guards.stop_diversity_ratio is None and not by_reward:
        return None
    n = guards.check_samples
    key = f"stop_ref/{n}"
    if key not in prep:
        scale = FeatureScale(prep["data"])
        feats = color_features(prep["data"])
        b = generate(prep["base"], TRAIN_TAG_SETS, n, seed=STOP_NOISE)
        flat = b.reshape(-1, *b.shape[2:])
        prep[key] = (scale, feats, frechet_distance(color_features(flat), feats),
                     diversity(b, scale), flat)  # fmt: skip
    scale, feats, fd_base, div_base, flat_base = prep[key]

    def score(flat: np.ndarray) -> float:
        return float(prep["scorer"].score_images(list(flat), [creator] * len(flat)).mean())

    reward_base = score(flat_base) if by_reward else 0.0

    def stop(model: Any) -> bool:
        a = generate(model, TRAIN_TAG_SETS, n, seed=STOP_NOISE)
        flat = a.reshape(-1, *a.shape[2:])
        fd = frechet_distance(color_features(flat), feats) / fd_base
        div = diversity(a, scale) / div_base
        return (
            (guards.stop_fd_ratio is not None and fd > guards.stop_fd_ratio)
            or (guards.stop_diversity_ratio is not None and div < guards.stop_diversity_ratio)
            or (by_reward and score(flat) < reward_base)
        )

    return stop


def with_monitor(stop: Any, monitor: Callable[[Any], None] | None) -> Any:
    """`stop` with `monitor(model)` called first at every check (None: `stop` as is)."""
    if monitor is None:
        return stop

    def check(model: Any) -> bool:
        monitor(model)
        return bool(stop is not None and stop(model))

    return check


def align(
    prep: dict[str, Any], creator: str, algo: str, run_dir: Path, *, host: Any,
    grpo: FlowGRPOConfig, dpo: FlowDPOConfig, guards: GuardConfig,
    monitor: Callable[[Any], None] | None = None,
) -> tuple[Any, dict[str, Any]]:  # fmt: skip
    """Step 3 for one creator and algorithm, from the base; returns (model, extras).

    `monitor(model)` (validation only) is called at every early-stopping check (every
    `guards.check_every` GRPO steps), before the check, so one run gives the whole curve."""
    base, sel, scorer = prep["base"], prep["sel"], prep["scorer"]
    model = clone(base)
    if algo == "grpo":
        verts, tags = conditions(TRAIN_TAG_SETS)
        reward_model: Any = scorer
        extra: dict[str, Any] = {}
        if guards.ceiling_quantile is not None:
            chosen = chosen_images(prep, creator)
            ceiling = ceiling_from(scorer, chosen, creator, guards.ceiling_quantile)
            reward_model, extra["ceiling"] = ClippedScorer(scorer, ceiling), ceiling
        g = grpo.model_copy(update={"weights": guards.weights(grpo.weights)})
        stop = with_monitor(quality_stop(prep, guards, creator), monitor)
        hist = flow_grpo(model, base, verts, tags, g, rewards=host.rewards, creator=creator,
                         context={"aesthetic_model": reward_model, "colour_anchor": prep["anchor"]},
                         run_dir=run_dir, stop=stop, check_every=guards.check_every,
                         backtrack=guards.backtrack, retries=guards.retries,
                         retry_lr_scale=guards.retry_lr_scale)  # fmt: skip
        extra["steps_kept"] = hist[-1].get("early_stop_kept", float(len(hist)))
        curve = [h.get("reward/total/mean") for h in hist]
        extra.update(reward_curve=[curve[0], curve[-1]], kl=hist[-1].get("kl"))
        return model, extra
    p = dpo_pairs(sel["candidates"] * 2 - 1, sel["picks"][creator], sel["verticals"],
                  sel["tags"])  # fmt: skip
    guarded = dpo.check_every is not None or dpo.anchor_ladder is not None
    stop = with_monitor(quality_stop(prep, guards, creator), monitor) if guarded else None
    res = flow_dpo(model, base, p, dpo, run_dir=run_dir, stop=stop)
    out = {"pairs": len(p["xw"]), "dpo_accuracy": res.metrics.get("accuracy")}
    if stop is not None and dpo.check_every is not None:
        out["steps_kept"] = res.history[-1].get("early_stop_kept", float(dpo.steps))
    if stop is not None and dpo.anchor_ladder is not None:
        out["anchor_kept"] = res.history[-1]["anchor_kept"]
    return model, out


def run_seed(
    out: str | Path, *, seed: int, host: Any, collect: Collect, creators: Sequence[str],
    judge: str, algorithms: Sequence[str] = ("grpo", "dpo"), grpo: FlowGRPOConfig | None = None,
    dpo: FlowDPOConfig | None = None, n_eval: int = 16, base_path: str | Path = BASE_WEIGHTS,
    guards: GuardConfig | None = None, eval_seed: int = 1234,
) -> dict[str, Any]:  # fmt: skip
    """One seed of the experiment (see the module docstring); returns and writes the report.

    `judge` names the reward (in `host`) that step 4 measures each creator's win rate by."""
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    judge_reward = host.reward(judge)
    t0 = time.perf_counter()
    prep = prepare(root, seed=seed, host=host, collect=collect, creators=creators,
                   base_path=base_path)  # fmt: skip
    g = (grpo or FlowGRPOConfig()).with_seed(seed)
    d = (dpo or FlowDPOConfig()).model_copy(update={"seed": seed})
    rm = prep["rm"]
    report: dict[str, Any] = {
        "seed": seed, "reward_model": {"heldout": rm["heldout"]["accuracy"],
                                       "by_creator": rm["heldout"]["by_creator"]},
        "guards": (guards or GuardConfig()).model_dump(), "results": {},
    }  # fmt: skip
    cache: dict[str, np.ndarray] = {}
    for creator in prep["creators"]:
        for algo in algorithms:
            t1 = time.perf_counter()
            model, extra = align(prep, creator, algo, root / f"{creator}-{algo}", host=host,
                                 grpo=g, dpo=d, guards=guards or GuardConfig())  # fmt: skip
            train_s = time.perf_counter() - t1
            save_flow(model, root / f"{creator}-{algo}", {"trained_by": f"flow {algo}"})
            rep = compare(prep["base"], model, creator, judge_reward, data_images=prep["data"],
                          n_per_set=n_eval, scorer=prep["scorer"], base_samples=cache,
                          seed=eval_seed, chosen=chosen_images(prep, creator))  # fmt: skip
            rep.update(extra, seconds=train_s, taste_fd_ratio=taste_fd_ratio(prep, creator))
            report["results"][f"{creator}/{algo}"] = rep
    report["seconds"] = time.perf_counter() - t0
    (root / "report.json").write_text(json.dumps(report, indent=2, default=float))
    return report


def summarise(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Seed mean and std of every figure, per creator/algorithm and split."""
    out: dict[str, Any] = {}
    for key in reports[0]["results"]:
        out[key] = {}
        for split in ("train", "heldout"):
            vals: dict[str, list[float]] = {}
            for r in reports:
                for m, v in r["results"][key][split].items():
                    vals.setdefault(m, []).append(float(v))
            out[key][split] = {
                m: {"mean": float(np.mean(v)), "std": float(np.std(v)), "n": len(v)}
                for m, v in vals.items()
            }
    return out


def before_after_sheet(base: np.ndarray, aligned: np.ndarray, title: str) -> Any:
    """A labelled grid: rows = training tag sets, columns = base samples then the aligned
    model's from the same noise ([S, N, H, W, 3] each)."""
    n = base.shape[1]
    cells = [list(base[s]) + list(aligned[s]) for s in range(len(base))]
    columns = [f"base {i + 1}" for i in range(n)] + [f"aligned {i + 1}" for i in range(n)]
    rows = [label(v, ts) for v, ts in TRAIN_TAG_SETS]
    return contact_sheet(cells, columns=columns, rows=rows, cell=96, title=title, font_size=12)


def quickstart_stage(
    out: str | Path, *, host: Any, collect: Collect, creators: Sequence[str], judge: str,
    seed: int = 0, grpo: FlowGRPOConfig | None = None, n_eval: int = 8,
    guards: GuardConfig | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The quickstart's flow stage: Flow-GRPO per creator from the packaged base, then
    `out/flow/<creator>_before_after.png` (rows: tag sets; left half base, right half
    aligned, same noise) and `out/flow/report.json`. `host` must have the flow plugin
    loaded (the `flow-composition` encoder and the `aesthetic` reward) and the `judge`."""
    root = Path(out) / "flow"
    rep = run_seed(root / "run", seed=seed, host=host, collect=collect, creators=creators,
                   judge=judge, algorithms=("grpo",), grpo=grpo, n_eval=n_eval,
                   guards=guards or QUICKSTART_GUARDS)  # fmt: skip
    base, _ = load_flow(BASE_WEIGHTS)
    b = generate(base, TRAIN_TAG_SETS, 4, seed=99)  # one base sheet, every creator's left half
    grids = {}
    for name in creators:
        aligned, _ = load_flow(root / "run" / f"{name}-grpo" / "model.safetensors")
        a = generate(aligned, TRAIN_TAG_SETS, 4, seed=99)
        sheet = before_after_sheet(b, a, f"{name}: Flow-GRPO, base vs aligned, same noise")
        grids[name] = str(save_sheet(sheet, root / f"{name}_before_after.png"))
    summary = {
        "grids": grids,
        "win_rate": {k: v["train"]["win_rate"] for k, v in rep["results"].items()},
        "heldout_win_rate": {k: v["heldout"]["win_rate"] for k, v in rep["results"].items()},
        "diversity_ratio": {k: v["train"]["diversity/ratio"] for k, v in rep["results"].items()},
        "fd_ratio": {k: v["train"]["fd/ratio"] for k, v in rep["results"].items()},
        "seconds": rep["seconds"],
    }
    (root / "report.json").write_text(
        json.dumps({**rep, "summary": summary}, indent=2, default=float)
    )
    return summary
