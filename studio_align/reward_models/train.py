"""Train an aesthetic reward model from creator selection logs (`studio-align train reward`).

Pipeline: read logs with `studio_align.data.reader.LogReader` (invalid lines, including
selections with a single candidate, are reported with file and line, or quarantined);
expand each n-way selection into chosen ≻ unchosen pairs (`data.compile.records_for`);
split by (creator, session) group (`data.split.assign_split`), never by line; embed every
distinct image once through the on-disk cache; fit a Bradley-Terry head; report held-out
pairwise accuracy overall, by creator and by session; apply the quality gate.

Rating events (one image, thumbs up or down: the common case on a platform) train the
same head through a pointwise term (`algorithms.pointwise`: Bradley-Terry against a
learned reference score, or KTO's bounded value), weighted by `ratings_weight`; they are
split by (creator, session) like selections (a rating without a session is grouped by
creator and UTC day) and reported as held-out rating accuracy. Logs with ratings and no
selections train a ratings-only model, gated on held-out rating accuracy.

All images are decoded and embedded before training starts, so a bad file fails (or,
with `skip_bad_images`, is dropped with its pairs and reported) before any optimiser
step: never mid-training.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import UTC
from pathlib import Path
from typing import Any

import numpy as np
from flax import nnx

from studio_align.data.compile import InvalidLogError, records_for
from studio_align.data.reader import LogReader
from studio_align.data.schemas import RatingEvent, SelectionEvent
from studio_align.data.split import assign_split
from studio_align.errors import DataError
from studio_align.reward_models.cache import CachedEncoder
from studio_align.reward_models.config import EncoderConfig as EncoderConfig
from studio_align.reward_models.config import FitSection as FitSection
from studio_align.reward_models.config import GateConfig as GateConfig
from studio_align.reward_models.config import HeadConfig as HeadConfig
from studio_align.reward_models.config import RewardTrainConfig as RewardTrainConfig
from studio_align.reward_models.encoders import make_encoder
from studio_align.reward_models.fit import FitConfig, fit_preference
from studio_align.reward_models.preference import (
    PairData,
    PreferenceModel,
    check_quality_gate,
    pairwise_accuracy,
    rating_accuracy,
    save_preference_model,
)
from studio_align.training.distributed import (
    is_main_process,
    maybe_initialize,
    replicated,
)


def read_selection_pairs(
    logs: list[str], *, seed: int, heldout_fraction: float, quarantine: str | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Selection pairs (dicts with chosen/rejected image paths, creator, session, split)."""
    pairs, _, summary = read_preference_events(
        logs, seed=seed, heldout_fraction=heldout_fraction, quarantine=quarantine
    )
    return pairs, summary


def read_preference_events(
    logs: list[str], *, seed: int, heldout_fraction: float, quarantine: str | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """(selection pairs, ratings, log summary); ratings are dicts with image, up, split."""
    reader = LogReader(logs, quarantine=quarantine)
    pairs: list[dict[str, Any]] = []
    ratings: list[dict[str, Any]] = []
    for entry in reader:
        ev = entry.event
        if isinstance(ev, RatingEvent):
            session = ev.session or f"day:{ev.ts.astimezone(UTC).date().isoformat()}"
            ratings.append(
                {
                    "image": entry.image_path(ev.image),
                    "up": ev.label == "up",
                    "creator": ev.creator,
                    "session": session,
                    "split": assign_split(
                        ev.creator, session, seed=seed, heldout_fraction=heldout_fraction
                    ),
                }
            )
            continue
        if not isinstance(ev, SelectionEvent):
            continue
        split = assign_split(ev.creator, ev.session, seed=seed, heldout_fraction=heldout_fraction)
        for name, rec in records_for(ev, entry.image_path):
            if name == "selection_pairs":
                pairs.append({**rec, "split": split, "log": f"{entry.path}:{entry.line}"})
    if reader.summary.invalid_count and quarantine is None:
        raise InvalidLogError(reader.summary)
    return pairs, ratings, reader.summary.to_dict()


def _pair_data(
    pairs: list[dict[str, Any]],
    index: dict[str, int],
    feats: np.ndarray,
    creators: list[str],
    ratings: list[dict[str, Any]] = (),  # type: ignore[assignment]
) -> PairData:
    table = {c: i for i, c in enumerate(creators)}
    return PairData(
        rated=np.array([index[r["image"]] for r in ratings], np.int32),
        rated_up=np.array([r["up"] for r in ratings], bool),
        rated_creator=np.array([table.get(r["creator"], -1) for r in ratings], np.int32),
        rated_creators=[r["creator"] for r in ratings],
        features=feats,
        chosen=np.array([index[p["chosen_image"]] for p in pairs], np.int32),
        rejected=np.array([index[p["rejected_image"]] for p in pairs], np.int32),
        creator=np.array([table.get(p["creator"], -1) for p in pairs], np.int32),
        sessions=[f"{p['creator']}/{p['session']}" for p in pairs],
        creators=[p["creator"] for p in pairs],
    )


def train_reward(
    cfg: RewardTrainConfig,
    *,
    host: Any = None,
    features: Mapping[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Run the whole pipeline; returns the report also written to OUT/metrics.json.

    `features`: embeddings a caller already computed with this very encoder (same files,
    same decode), by image path, e.g. `train grading`'s thumbnails' colour features;
    those files are not decoded or hashed again, the rest go through the cache.

    Raises `QualityGateError` (after saving the model, marked as failed) when held-out
    accuracy is below `gate.min_heldout_accuracy`.
    """
    maybe_initialize(cfg.distributed)  # before anything touches a device
    t0 = time.perf_counter()
    out = Path(cfg.out)
    pairs, ratings, summary = read_preference_events(
        cfg.logs, seed=cfg.seed, heldout_fraction=cfg.heldout_fraction, quarantine=cfg.quarantine
    )
    if cfg.ratings_weight == 0:
        ratings = []
    if not pairs and not ratings:
        raise DataError(
            f"{', '.join(cfg.logs)}: no selection events with two or more candidates"
            + (" and no rating events" if cfg.ratings_weight else "")
        )
    encoder = make_encoder(cfg.encoder.name, cfg.encoder.options, host=host)
    cache_dir = cfg.encoder.cache_dir or str(out.parent / "embedding-cache")
    cached = CachedEncoder(encoder, cache_dir, max_side=cfg.encoder.max_side)
    paths = sorted(
        {p[k] for p in pairs for k in ("chosen_image", "rejected_image")}
        | {r["image"] for r in ratings}
    )
    known = features or {}
    todo = [p for p in paths if p not in known]
    bad: dict[str, str] = {}
    if cfg.skip_bad_images:
        todo_feats, bad = cached.encode_files_lenient(todo)
        pairs = [
            p for p in pairs if p["chosen_image"] not in bad and p["rejected_image"] not in bad
        ]
        ratings = [r for r in ratings if r["image"] not in bad]
    else:
        todo_feats = cached.encode_files(todo)
    feats = np.zeros((len(paths), encoder.dim), np.float32)
    at = {p: i for i, p in enumerate(todo)}
    for i, p in enumerate(paths):
        feats[i] = known[p] if p in known else todo_feats[at[p]]
    t_embed = time.perf_counter() - t0
    index = {p: i for i, p in enumerate(paths)}
    train = [p for p in pairs if p["split"] == "train"]
    held = [p for p in pairs if p["split"] == "heldout"]
    r_train = [r for r in ratings if r["split"] == "train"]
    r_held = [r for r in ratings if r["split"] == "heldout"]
    if not train and not r_train:
        raise DataError(
            "no training pairs after the creator/session split; add logs or lower heldout_fraction"
        )
    creators = (
        sorted({p["creator"] for p in train} | {r["creator"] for r in r_train})
        if cfg.head.per_creator
        else []
    )
    model = PreferenceModel(
        encoder.dim,
        hidden=cfg.head.hidden,
        creators=creators,
        ratings=bool(r_train),
        rngs=nnx.Rngs(cfg.seed),
    )
    fit = FitConfig(**cfg.train.model_dump(), seed=cfg.seed, ratings_weight=cfg.ratings_weight)
    data = _pair_data(train, index, feats, creators, r_train)
    losses = fit_preference(model, data, fit, cfg.run_config())
    train_acc = pairwise_accuracy(model, _pair_data(train, index, feats, creators))
    held_acc = pairwise_accuracy(model, _pair_data(held, index, feats, creators))
    held_ratings = rating_accuracy(model, _pair_data([], index, feats, creators, r_held))
    # ratings-only logs: the gate reads held-out rating accuracy
    acc = held_acc["accuracy"] if pairs else held_ratings["accuracy"]
    passed = bool(np.isfinite(acc) and acc >= cfg.gate.min_heldout_accuracy)
    report = {
        "pairs": {"train": len(train), "heldout": len(held)},
        "ratings": {"train": len(r_train), "heldout": held_ratings},
        "images": len(paths),
        "bad_images": bad,
        "log_summary": {k: summary[k] for k in ("total_lines", "valid", "invalid", "by_type")},
        "encoder": {
            "name": cfg.encoder.name,
            "identity": encoder.identity,
            "cache": cache_dir,
            "cache_hits": cached.stats.hits,
            "cache_misses": cached.stats.misses,
            "precomputed": len(paths) - len(todo),
        },
        "loss": {"first": losses[0] if losses else None, "last": losses[-1] if losses else None},
        "train": train_acc,
        "heldout": held_acc,
        "gate": {"floor": cfg.gate.min_heldout_accuracy, "accuracy": acc, "passed": passed},
        "seconds": {"embed": t_embed, "total": time.perf_counter() - t0},
    }
    nnx.update(model, replicated(nnx.state(model)))  # every process: a collective
    if is_main_process():
        _save(model, out, cfg, encoder, report)
    check_quality_gate(acc, cfg.gate.min_heldout_accuracy, what=f"reward model {out}")
    return report


def _save(model: Any, out: Path, cfg: RewardTrainConfig, encoder: Any, report: dict) -> None:
    """The model and its report (process 0 only)."""
    save_preference_model(
        model,
        out,
        {
            "encoder": {
                "name": cfg.encoder.name,
                "options": cfg.encoder.options,
                "identity": encoder.identity,
                "max_side": cfg.encoder.max_side,
            },
            "gate": report["gate"],
            "heldout": {
                "pairs": report["heldout"]["pairs"],
                "accuracy": report["gate"]["accuracy"],
            },
        },
    )
    (out / "metrics.json").write_text(json.dumps(report, indent=2, default=float))
