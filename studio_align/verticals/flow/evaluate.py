"""`eval flow`: win rate under a creator's hidden utility, diversity, Fréchet distance.

- **Win rate**: base and aligned models sample from the *same* initial noise and tag set
  (ODE, `steps`, `guidance`); the aligned sample wins when the creator's hidden utility
  ranks it above the base sample (ties count half). Pairing by noise removes the
  between-sample variance that unpaired comparisons would add.
- **Diversity**: mean pairwise Euclidean distance between standardised features
  (`flow-composition` encoder) of samples of the same tag set, averaged over tag sets;
  reported as the aligned/base ratio (the reward-hacking guard: collapse shows here).
- **Fréchet distance**: between Gaussian fits of colour-statistics features of the
  samples and of the pretraining data (a quality proxy in the spirit of FID, with a
  fixed numpy encoder instead of Inception).

Evaluation tag sets are fixed before any tuning: `HELDOUT_TAG_SETS` are never used by
alignment (the overfitting check); `TRAIN_TAG_SETS` are the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import linalg

from studio_align.generation.flow_sampler import sample_ode, to_unit
from studio_align.reward_models.color_stats import color_features
from studio_align.verticals.flow.creators import CompositionEncoder, FlowTaste
from studio_align.verticals.flow.data import ALL_TAG_SETS, encode

HELDOUT_TAG_SETS: list[tuple[str, tuple[str, ...]]] = [
    ("storyboard", ("two-shot", "night")),
    ("storyboard", ("wide",)),
    ("product", ("lifestyle", "top-down")),
]
TRAIN_TAG_SETS = [ts for ts in ALL_TAG_SETS if ts not in HELDOUT_TAG_SETS]


def conditions(tag_sets: Sequence[tuple[str, Sequence[str]]]) -> tuple[np.ndarray, np.ndarray]:
    enc = [encode(v, ts) for v, ts in tag_sets]
    return np.array([v for v, _ in enc], np.int32), np.stack([h for _, h in enc])


def generate(
    model: Any, tag_sets: Sequence[tuple[str, Sequence[str]]], n_per_set: int, *, seed: int,
    steps: int = 20, guidance: float = 1.0,
) -> np.ndarray:  # fmt: skip
    """[len(tag_sets), n_per_set, H, W, 3] images in [0, 1]; noise fixed by `seed`."""
    verts, tags = conditions(tag_sets)
    idx = np.repeat(np.arange(len(tag_sets)), n_per_set)
    out = []
    for start in range(0, len(idx), 64):  # one compiled batch bucket
        rows = idx[start : start + 64]
        pad = np.concatenate([rows, np.repeat(rows[-1:], 64 - len(rows))])
        imgs = sample_ode(model, verts[pad], tags[pad], steps=steps, guidance=guidance,
                          seed=seed * 100_003 + start)  # fmt: skip
        out.append(imgs[: len(rows)])
    x = to_unit(np.concatenate(out))
    return x.reshape(len(tag_sets), n_per_set, *x.shape[1:])


def frechet_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Fréchet distance between Gaussian fits of feature sets a [N, D] and b [M, D]."""
    mu1, mu2 = a.mean(0), b.mean(0)
    s1 = np.cov(a, rowvar=False) + 1e-6 * np.eye(a.shape[1])
    s2 = np.cov(b, rowvar=False) + 1e-6 * np.eye(b.shape[1])
    covmean = linalg.sqrtm(s1 @ s2)
    covmean = np.real(covmean)
    return float(np.sum((mu1 - mu2) ** 2) + np.trace(s1 + s2 - 2.0 * covmean))


class FeatureScale:
    """Standardisation of `flow-composition` features, fitted on reference images."""

    def __init__(self, reference: np.ndarray) -> None:
        self.enc = CompositionEncoder()
        f = self.enc.encode_images(list(reference))
        self.mu, self.sd = f.mean(0), f.std(0) + 1e-3

    def __call__(self, images: np.ndarray) -> np.ndarray:
        return (self.enc.encode_images(list(images)) - self.mu) / self.sd


def diversity(groups: np.ndarray, scale: FeatureScale) -> float:
    """Mean pairwise distance of standardised features within each group, averaged."""
    vals = []
    for g in groups:
        f = scale(g)
        d = np.sqrt(((f[:, None] - f[None]) ** 2).sum(-1))
        n = len(f)
        vals.append(d.sum() / (n * (n - 1)))
    return float(np.mean(vals))


def win_rate(taste: FlowTaste, base: np.ndarray, aligned: np.ndarray) -> float:
    """Paired win rate of `aligned` over `base` images ([..., H, W, 3], same noise)."""
    ub = taste.utility(base.reshape(-1, *base.shape[-3:]))
    ua = taste.utility(aligned.reshape(-1, *aligned.shape[-3:]))
    return float(np.mean((ua > ub) + 0.5 * (ua == ub)))


def compare(
    base: Any, aligned: Any, taste: FlowTaste, *, data_images: np.ndarray, n_per_set: int = 16,
    seed: int = 1234, steps: int = 20, guidance: float = 1.0, scorer: Any = None,
    base_samples: dict[str, np.ndarray] | None = None, splits: Sequence[str] = ("train", "heldout"),
    chosen: np.ndarray | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Every `eval flow` figure of `aligned` against `base` for one creator.

    `data_images` [M, H, W, 3] in [0, 1] are pretraining images (the FD reference and the
    feature standardisation). `base_samples` caches the base model's samples by split;
    `splits` limits the tag sets (validation looks at `train` only, with its own `seed`).
    `chosen` [N, H, W, 3]: the images the creator picked (training tag sets); adds, on the
    `train` split, the FD to them (`fd_chosen/*`): does alignment move toward what the
    creator chose, or past it?
    """
    scale = FeatureScale(data_images)
    data_feats = color_features(data_images)
    out: dict[str, Any] = {"creator": taste.name}
    cache = base_samples if base_samples is not None else {}
    for split, sets in (("train", TRAIN_TAG_SETS), ("heldout", HELDOUT_TAG_SETS)):
        if split not in splits:
            continue
        if split not in cache:
            cache[split] = generate(
                base, sets, n_per_set, seed=seed, steps=steps, guidance=guidance
            )
        b = cache[split]
        a = generate(aligned, sets, n_per_set, seed=seed, steps=steps, guidance=guidance)
        flat_a, flat_b = a.reshape(-1, *a.shape[2:]), b.reshape(-1, *b.shape[2:])
        div_a, div_b = diversity(a, scale), diversity(b, scale)
        fd_a = frechet_distance(color_features(flat_a), data_feats)
        fd_b = frechet_distance(color_features(flat_b), data_feats)
        m = {
            "win_rate": win_rate(taste, b, a),
            "utility/aligned": float(taste.utility(flat_a).mean()),
            "utility/base": float(taste.utility(flat_b).mean()),
            "diversity/aligned": div_a,
            "diversity/base": div_b,
            "diversity/ratio": div_a / div_b,
            "fd/aligned": fd_a,
            "fd/base": fd_b,
            "fd/ratio": fd_a / fd_b,
        }
        if chosen is not None and split == "train":
            cf = color_features(chosen)
            m["fd_chosen/aligned"] = frechet_distance(color_features(flat_a), cf)
            m["fd_chosen/base"] = frechet_distance(color_features(flat_b), cf)
            m["fd_chosen/ratio"] = m["fd_chosen/aligned"] / m["fd_chosen/base"]
        if scorer is not None:
            creators = [taste.name] * len(flat_a)
            m["reward/aligned"] = float(scorer.score_images(list(flat_a), creators).mean())
            m["reward/base"] = float(scorer.score_images(list(flat_b), creators).mean())
        out[split] = m
    return out
