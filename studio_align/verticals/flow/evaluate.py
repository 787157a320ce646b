"""`eval flow`: win rate under a creator's judge, diversity, Fréchet distance.

- **Win rate**: base and aligned models sample from the *same* initial noise and tag set
  (ODE, `steps`, `guidance`); the aligned sample wins when the judge ranks it above the
  base sample for that creator (ties count half). Pairing by noise removes the
  between-sample variance that unpaired comparisons would add. A judge is a reward over
  `images` and `creators` taken by name from the plugin host: the demo's is `flow_taste`
  (a simulated creator's hidden utility, registered by the simulators' plugin), so the
  product scores against a creator's taste without knowing it.
- **Diversity**: mean pairwise Euclidean distance between standardised features
  (`flow-composition` encoder) of samples of the same tag set, averaged over tag sets;
  reported as the aligned/base ratio (the reward-hacking guard: collapse shows here).
- **Fréchet distance**: between Gaussian fits of colour-statistics features of the
  samples and of the pretraining data (a quality proxy in the spirit of FID, with a
  fixed numpy encoder instead of Inception).

- **Sample quality** (`quality_figures`, the `quality` module): seam, noise and tag
  recognisability ratios of samples against fresh real images of the same tag sets, at
  guidance 1 and 3: does the model draw what its data shows, before and after alignment?

Evaluation tag sets are fixed before any tuning: `HELDOUT_TAG_SETS` are never used by
alignment (the overfitting check); `TRAIN_TAG_SETS` are the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy import linalg

from studio_align.errors import ConfigError
from studio_align.generation.flow_sampler import sample_ode, to_unit
from studio_align.reward_models.color_stats import color_features
from studio_align.rewards import Reward
from studio_align.scoring import score_batch
from studio_align.verticals.contact_sheet import contact_sheet, save_sheet
from studio_align.verticals.flow.composition import CompositionEncoder
from studio_align.verticals.flow.data import ALL_TAG_SETS, encode, label, real_by_tag_set
from studio_align.verticals.flow.quality import TagClassifier, fit_tag_classifier, sample_quality

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


def judge_scores(judge: Reward, images: np.ndarray, creator: str) -> np.ndarray:
    """`judge`'s score of each image ([..., H, W, 3] in [0, 1], flattened) for `creator`,
    float64; a judge without an opinion on an image is an error naming both."""
    flat = images.reshape(-1, *images.shape[-3:])
    columns: dict[str, Any] = {"images": flat, "creators": [creator] * len(flat)}
    scores = score_batch({judge.name: judge}, columns=columns).per_reward[judge.name]
    if np.isnan(scores).any():
        raise ConfigError(f"judge {judge.name!r} has no opinion on creator {creator!r}'s images")
    return scores


def win_rate(base_scores: np.ndarray, aligned_scores: np.ndarray) -> float:
    """Paired win rate of aligned over base samples from their scores (same noise)."""
    ub, ua = np.asarray(base_scores), np.asarray(aligned_scores)
    return float(np.mean((ua > ub) + 0.5 * (ua == ub)))


def compare(
    base: Any, aligned: Any, creator: str | None = None, judge: Reward | None = None, *,
    data_images: np.ndarray, n_per_set: int = 16, seed: int = 1234, steps: int = 20,
    guidance: float = 1.0, scorer: Any = None, base_samples: dict[str, np.ndarray] | None = None,
    splits: Sequence[str] = ("train", "heldout"), chosen: np.ndarray | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Every `eval flow` figure of `aligned` against `base`, for one creator.

    `judge` (a reward, with `creator`) adds the win rate and both models' mean score
    (`utility/*`); without one the figures are the creator-free ones (diversity, FD).
    `data_images` [M, H, W, 3] in [0, 1] are pretraining images (the FD reference and the
    feature standardisation). `base_samples` caches the base model's samples by split;
    `splits` limits the tag sets (validation looks at `train` only, with its own `seed`).
    `scorer` (a reward model) adds its mean score for `creator` (`reward/*`).
    `chosen` [N, H, W, 3]: the images the creator picked (training tag sets); adds, on the
    `train` split, the FD to them (`fd_chosen/*`): does alignment move toward what the
    creator chose, or past it?
    """
    if (judge is not None or scorer is not None) and creator is None:
        raise ConfigError("compare: a judge or a scorer scores for a creator; name one")
    scale = FeatureScale(data_images)
    data_feats = color_features(data_images)
    out: dict[str, Any] = {"creator": creator}
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
        m: dict[str, float] = {}
        if judge is not None:
            assert creator is not None
            ub, ua = judge_scores(judge, flat_b, creator), judge_scores(judge, flat_a, creator)
            m.update({"win_rate": win_rate(ub, ua), "utility/aligned": float(ua.mean()),
                      "utility/base": float(ub.mean())})  # fmt: skip
        m.update({
            "diversity/aligned": div_a,
            "diversity/base": div_b,
            "diversity/ratio": div_a / div_b,
            "fd/aligned": fd_a,
            "fd/base": fd_b,
            "fd/ratio": fd_a / fd_b,
        })  # fmt: skip
        if chosen is not None and split == "train":
            cf = color_features(chosen)
            m["fd_chosen/aligned"] = frechet_distance(color_features(flat_a), cf)
            m["fd_chosen/base"] = frechet_distance(color_features(flat_b), cf)
            m["fd_chosen/ratio"] = m["fd_chosen/aligned"] / m["fd_chosen/base"]
        if scorer is not None:
            creators = [creator] * len(flat_a)
            m["reward/aligned"] = float(scorer.score_images(list(flat_a), creators).mean())
            m["reward/base"] = float(scorer.score_images(list(flat_b), creators).mean())
        out[split] = m
    return out


def quality_figures(
    models: dict[str, Any], tag_sets: Sequence[tuple[str, Sequence[str]]], real: np.ndarray,
    classifier: TagClassifier, *, patch: int, n_per_set: int = 24,
    guidances: Sequence[float] = (1.0, 3.0), seed: int = 1234, steps: int = 20,
) -> tuple[dict[str, dict[str, dict[str, float | None]]], dict[str, dict[str, np.ndarray]]]:  # fmt: skip
    """The sample-quality section: per model name and guidance (`"guidance 3"`), the
    `quality.sample_quality` figures of `n_per_set` samples per tag set against `real`
    [S, N, H, W, 3] images of the same `tag_sets` (fresh, not the classifier's); and
    the samples themselves by model and guidance (for the report's grids)."""
    figures: dict[str, dict[str, dict[str, float | None]]] = {}
    samples: dict[str, dict[str, np.ndarray]] = {}
    for name, model in models.items():
        for g in guidances:
            key = f"guidance {g:g}"
            x = generate(model, tag_sets, n_per_set, seed=seed, steps=steps, guidance=g)
            figures.setdefault(name, {})[key] = sample_quality(x, real, classifier, patch=patch)
            samples.setdefault(name, {})[key] = x
    return figures, samples


def quality_sheet(
    real: np.ndarray, samples: dict[str, np.ndarray], tag_sets: Sequence[tuple[str, Sequence[str]]],
    *, per_model: int = 3, title: str | None = None,
) -> Any:  # fmt: skip
    """A labelled grid: rows = tag sets, columns = `per_model` real images then as many
    samples of each named model (`samples[name]` [S, N, H, W, 3])."""
    columns = [f"real {i + 1}" for i in range(per_model)]
    cells = [list(real[s, :per_model]) for s in range(len(tag_sets))]
    for name, x in samples.items():
        columns += [f"{name} {i + 1}" for i in range(per_model)]
        for s in range(len(tag_sets)):
            cells[s] += list(x[s, :per_model])
    rows = [label(v, ts) for v, ts in tag_sets]
    return contact_sheet(cells, columns=columns, rows=rows, cell=64, title=title, font_size=12)


CLASSIFIER_DRAWS = 300  # real images per tag set the tag classifier is fitted on
CLASSIFIER_SEED, REAL_SEED = 7, 8  # neither is the pretraining data's seed (0)


def sample_quality_section(
    models: dict[str, Any], *, n_per_set: int = 24, guidances: Sequence[float] = (1.0, 3.0),
    seed: int = 1234, report_dir: Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """`eval flow`'s sample-quality section for named models (e.g. base and aligned) on
    every tag set: a tag classifier fitted on `CLASSIFIER_DRAWS` procedural images per tag
    set, `n_per_set` fresh real images, the figures of `quality_figures` (seam measured on
    the first model's patch grid); with `report_dir`, one labelled sheet per guidance."""
    first = next(iter(models.values()))
    size, patch = first.cfg.image_size, getattr(first.cfg, "seam_grid", 8)
    clf = fit_tag_classifier(real_by_tag_set(ALL_TAG_SETS, CLASSIFIER_DRAWS,
                                             seed=CLASSIFIER_SEED, size=size))  # fmt: skip
    real = real_by_tag_set(ALL_TAG_SETS, n_per_set, seed=REAL_SEED, size=size)
    figures, samples = quality_figures(models, ALL_TAG_SETS, real, clf, patch=patch,
                                       n_per_set=n_per_set, guidances=guidances, seed=seed)  # fmt: skip
    out: dict[str, Any] = {"patch": patch, "n_per_set": n_per_set, "figures": figures}
    if report_dir is not None:
        sheets = {}
        for g in guidances:
            key = f"guidance {g:g}"
            sheet = quality_sheet(real, {n: s[key] for n, s in samples.items()}, ALL_TAG_SETS,
                                  title=f"real vs samples, {key}, same noise per column")  # fmt: skip
            sheets[key] = str(save_sheet(sheet, report_dir / f"quality_g{g:g}.png"))
        out["sheets"] = sheets
    return out
