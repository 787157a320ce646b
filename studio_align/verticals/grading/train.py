"""`train grading`: a platform's logs -> reward model -> behaviour cloning -> GRPO or DPO.

Stages, each in its own sub-directory of `run_dir`, each resumable:

1. **read** the logs (`logs.read_grading_logs`) and decode every image once into a
   thumbnail (`dataset.load_thumbs`); bad lines, unknown parameter names, unreadable
   images and one-event creators are errors naming the file and line, or skipped and
   counted, as configured (`report["data"]`).
2. **reward model**: `reward.model` (a `train reward` output), or trained inline by
   `reward_models.train.train_reward` on the same logs with the same split (selections
   by Bradley-Terry, ratings by the pointwise KTO-style term). Reused on resume.
3. **behaviour cloning** of retouch `after` grades through `training.loop.train_loop`
   (`bc/`: orbax checkpoints, exact resume, metrics hook, progress bar).
4. **tuning** from the cloned policy: `grpo` through `training.grpo.GRPOStep` with
   the plugin rewards (`aesthetic` under the reward model, `identity` against
   over-editing, weights from `[reward]`), KL to the cloned policy; or `dpo` through
   `train_loop` on grade pairs. Checkpoints in `grpo/` or `dpo/`.
5. **save** `model/` (the tuned `GradingModel`) and `model/base/` (the untuned policy,
   the baseline `eval grading` compares against), and report held-out ΔE2000.

The base policy is the randomly initialised policy with input statistics fitted on the
training thumbnails: that is what "untuned" means in every figure.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from studio_align.errors import ConfigError, DataError
from studio_align.plugins import get_host
from studio_align.reward_models.scorer import AestheticScorer
from studio_align.reward_models.train import EncoderConfig, RewardTrainConfig, train_reward
from studio_align.training.batches import ArrayBatches
from studio_align.training.distributed import maybe_initialize
from studio_align.training.grpo import GRPOStep, plugin_reward_fn
from studio_align.training.loop import TrainConfig, TrainRunConfig, train_loop
from studio_align.training.optim import OptimConfig
from studio_align.training.supervised import supervised
from studio_align.verticals.grading.color import mean_delta_e
from studio_align.verticals.grading.dataset import (
    Thumbs,
    bc_arrays,
    dpo_arrays,
    load_thumbs,
    prompt_rows,
)
from studio_align.verticals.grading.logs import GradingLogs, read_grading_logs
from studio_align.verticals.grading.model import GradingModel, copy_policy
from studio_align.verticals.grading.objectives import (
    ConditionedRolloutPolicy,
    bc_loss,
    make_dpo_grade_loss,
    reference_logps,
)
from studio_align.verticals.grading.renderer import render
from studio_align.verticals.grading.run_config import GradingRunConfig


def _loop_cfg(
    cfg: GradingRunConfig, stage: str, steps: int, optim: OptimConfig, *, batch_size: int = 16,
    log_every: int | None = None,
) -> TrainRunConfig:  # fmt: skip
    """One stage's loop: `[train]`'s seed and logging with the stage's steps and batch."""
    train = TrainConfig.model_validate(
        {**cfg.train.model_dump(), "steps": steps, "batch_size": batch_size,
         "log_every": log_every or cfg.train.log_every}
    )  # fmt: skip
    return TrainRunConfig(
        run_dir=cfg.run_dir / stage,
        train=train,
        optim=optim,
        checkpoint=cfg.checkpoint,
        mesh=cfg.mesh,
        distributed=cfg.distributed,
    )


def _reward_model(
    cfg: GradingRunConfig, data: GradingLogs, th: Thumbs, host: Any
) -> tuple[Any, dict]:
    """The scorer for GRPO's `aesthetic` reward and its held-out figures.

    An inline reward model uses the colour-statistics encoder at the policy's thumbnail
    size with the same decode (`max_side = 4 * thumbnail`) as `load_thumbs`, so its
    embeddings are exactly the thumbnails' features: they are passed in, and no image is
    decoded a second time (at 512 px that second decode was most of the reward stage)."""
    if cfg.reward.model:
        scorer = AestheticScorer.load(cfg.reward.model, require_gate=True, host=host)
        return scorer, {"path": cfg.reward.model, "heldout": scorer.meta.get("heldout")}
    out = cfg.run_dir / "reward_model"
    if (out / "metrics.json").exists() and (out / "meta.json").exists():
        scorer = AestheticScorer.load(out, require_gate=True, host=host)
        rep = json.loads((out / "metrics.json").read_text())
        return scorer, {"path": str(out), "reused": True, "heldout": rep.get("heldout")}
    if not any(s.split == "train" for s in data.selections) and not data.ratings:
        return None, {"path": None, "reason": "no selections or ratings to learn from"}
    rcfg = RewardTrainConfig(
        logs=cfg.logs,
        out=str(out),
        quarantine=None if cfg.quarantine is None else str(cfg.run_dir / "reward-quarantine.jsonl"),
        skip_bad_images=cfg.skip_bad_images,
        seed=cfg.train.seed,
        heldout_fraction=cfg.heldout_fraction,
        encoder=EncoderConfig(
            name="color-stats",
            options={"size": cfg.policy.thumbnail},
            cache_dir=str(cfg.run_dir / "embedding-cache"),
            max_side=4 * cfg.policy.thumbnail,
        ),
        head=cfg.reward.head,
        train=cfg.reward.train,
        gate=cfg.reward.gate,
        ratings_weight=cfg.reward.ratings_weight,
    )
    feats = {p: th.feats[i] for p, i in th.index.items()}
    rep = train_reward(rcfg, host=host, features=feats)
    scorer = AestheticScorer.load(out, require_gate=True, host=host)
    return scorer, {"path": str(out), "heldout": rep["heldout"], "ratings": rep.get("ratings")}


def heldout_delta_e(
    model: GradingModel, data: GradingLogs, th: Thumbs, split: str = "heldout"
) -> dict[str, dict[str, float]]:
    """Per creator: mean ΔE2000 of the model's grade to the creator's own `after` grade."""
    rs = [r for r in data.retouches if r.split == split]
    if not rs:
        return {}
    rows = th.rows([r.image for r in rs])
    pred = model.predict_features(th.feats[rows], [""] * len(rs), [r.creator for r in rs])
    target = render(th.pixels[rows], np.stack([r.after for r in rs]))
    de = mean_delta_e(render(th.pixels[rows], pred), target)
    out: dict[str, list[float]] = {}
    for r, d in zip(rs, de, strict=True):
        out.setdefault(r.creator, []).append(float(d))
    return {c: {"n": len(v), "delta_e": float(np.mean(v))} for c, v in out.items()}


def train_grading(cfg: GradingRunConfig, *, host: Any = None) -> dict[str, Any]:
    """Run every stage (see the module docstring); returns the report (`run_dir/report.json`)."""
    if host is None:
        host = get_host()
    maybe_initialize(cfg.distributed)
    t0 = time.perf_counter()
    cfg.run_dir.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    data = read_grading_logs(
        cfg.logs,
        seed=cfg.train.seed,
        heldout_fraction=cfg.heldout_fraction,
        quarantine=cfg.quarantine,
        strict=cfg.strict,
    )
    th, bad = load_thumbs(data.images(), cfg.policy.thumbnail, skip_bad=cfg.skip_bad_images)
    data.drop_images(bad)
    counts = data.creator_counts("train")
    creators = sorted(c for c, n in counts.items() if n >= cfg.policy.min_creator_events)
    rare = {c: n for c, n in counts.items() if n < cfg.policy.min_creator_events}
    for c in rare:
        data.skip("rare_creator", f"creator {c!r}: {rare[c]} training event(s); population slot")
    seconds["read"] = time.perf_counter() - t0

    t = time.perf_counter()
    scorer, rm_report = _reward_model(cfg, data, th, host)
    seconds["reward_model"] = time.perf_counter() - t

    model = GradingModel.create(
        creators,
        hidden=cfg.policy.hidden,
        init_log_std=cfg.policy.init_log_std,
        thumbnail=cfg.policy.thumbnail,
        seed=cfg.train.seed,
    )
    train_paths = sorted({p for p in prompt_rows(data, th)[0]} | {
        r.image for r in data.retouches if r.split == "train"
    })  # fmt: skip
    if not train_paths:
        raise DataError("no training events with readable images after the creator/session split")
    model.policy.set_input_stats(th.feats[th.rows(train_paths)])
    base = GradingModel(copy_policy(model.policy), creators, thumbnail=model.thumbnail)

    t = time.perf_counter()
    stages: dict[str, Any] = {}
    bc = bc_arrays(data, th, model)
    if cfg.bc.steps and len(bc["actions"]):
        # fewer retouches than a batch (a small platform): one batch of all of them
        bs = min(cfg.bc.batch_size, len(bc["actions"]))
        bc_source = ArrayBatches(bc, bs, seed=cfg.train.seed)
        res = train_loop(
            model.policy,
            _loop_cfg(cfg, "bc", cfg.bc.steps, cfg.bc.optim(), batch_size=bs),
            supervised(bc_loss, bc_source),  # type: ignore[arg-type]  # a GradingPolicy loss
            name="bc",
        )
        stages["bc"] = {"examples": len(bc["actions"]), "steps": res.step, **res.metrics}
        stages["bc"]["resumed_from"] = res.resumed_from
    seconds["bc"] = time.perf_counter() - t

    t = time.perf_counter()
    reference = copy_policy(model.policy)
    if cfg.algorithm == "dpo" and cfg.stage_steps:
        d = dpo_arrays(data, th, model)
        d["ref_chosen"] = reference_logps(reference, d["feats"], d["cond"], d["chosen"])
        d["ref_rejected"] = reference_logps(reference, d["feats"], d["cond"], d["rejected"])
        loss = make_dpo_grade_loss(beta=cfg.dpo.beta, loss_type=cfg.dpo.loss_type)
        bs = min(cfg.train.batch_size, len(d["chosen"]))
        dpo_source = ArrayBatches(d, bs, seed=cfg.train.seed)
        res = train_loop(
            model.policy,
            _loop_cfg(cfg, "dpo", cfg.stage_steps, cfg.optim, batch_size=bs),
            supervised(loss, dpo_source),
            name="dpo",
        )
        stages["dpo"] = {"pairs": len(d["chosen"]), "steps": res.step, **res.metrics}
    elif cfg.algorithm == "grpo" and cfg.stage_steps:
        stages["grpo"] = _grpo(cfg, model, reference, data, th, scorer, host)
    seconds["tune"] = time.perf_counter() - t

    heldout = {
        "tuned": heldout_delta_e(model, data, th),
        "base": heldout_delta_e(base, data, th),
    }
    split = {"seed": cfg.train.seed, "heldout_fraction": cfg.heldout_fraction}
    meta = {
        "algorithm": cfg.algorithm,
        "split": split,
        "logs": [str(Path(x).absolute()) for x in cfg.logs],
        "reward_model": rm_report.get("path"),
        "rare_creators": rare,
    }
    out = model.save(cfg.run_dir / "model", **meta, heldout_delta_e=heldout)
    base.save(out / "base", **meta, role="untuned base policy")
    seconds["total"] = time.perf_counter() - t0
    report = {
        "model": str(out),
        "creators": creators,
        "data": data.summary(),
        "images": {"decoded": len(th.index), "unreadable": len(bad)},
        "reward_model": rm_report,
        "stages": stages,
        "heldout_delta_e": heldout,
        "seconds": seconds,
    }
    (cfg.run_dir / "report.json").write_text(json.dumps(report, indent=2, default=float))
    return report


def _grpo(
    cfg: GradingRunConfig,
    model: GradingModel,
    reference: Any,
    data: GradingLogs,
    th: Thumbs,
    scorer: Any,
    host: Any,
) -> dict[str, Any]:
    weights = dict(cfg.reward.weights)
    missing = sorted(set(weights) - set(host.rewards))
    if missing:
        raise ConfigError(
            f"reward.weights: unknown reward(s) {missing}; registered: {sorted(host.rewards)}"
        )
    if "aesthetic" in weights and scorer is None:
        raise ConfigError(
            "reward.weights uses 'aesthetic' but there is no reward model (no selections or "
            "ratings in the logs, and reward.model is empty)"
        )
    paths, styles, who = prompt_rows(data, th)
    rows = th.rows(paths)
    sources = th.pixels[rows]
    cond = model.conditioning(styles, who)
    records = [
        {"prompt": i, "sources": sources[i], "requests": styles[i], "creators": who[i]}
        for i in range(len(rows))
    ]
    g = cfg.grpo
    step = GRPOStep(
        ConditionedRolloutPolicy(sources, th.feats[rows], cond),
        records,
        plugin_reward_fn(
            {k: host.rewards[k] for k in weights},
            weights,
            context={"aesthetic_model": scorer},
            call=cfg.reward_call,
        ),
        g.grpo(),
        ref_model=reference if g.beta > 0 else None,
    )
    run = _loop_cfg(cfg, "grpo", cfg.stage_steps, cfg.optim, log_every=1)
    result = train_loop(model.policy, run, step, name="grpo")  # its progress / heartbeat lines
    hist = result.history
    first = [h["reward/total/mean"] for h in hist[:5]]
    last = [h["reward/total/mean"] for h in hist[-5:]]
    return {
        "prompts": len(records),
        "steps": result.step,
        "reward_first": float(np.mean(first)) if first else None,
        "reward_last": float(np.mean(last)) if last else None,
        "compiles": result.compiles,
    }
