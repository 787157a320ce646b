"""Guards against reward hacking in Flow-GRPO: a reward ceiling and a colour-stats anchor.

A learned reward model extrapolates: trained on the base model's candidates, it keeps
scoring "more of the same" ever higher outside that distribution (last round Flow-GRPO
drove the `lumen` reward 0.15 -> 4.6 with pale uniform frames, diversity 0.51x and
Fréchet distance 3.6x the base). Two guards tie the optimisation to the data it learned
from:

- `ClippedScorer`: the reward model with its score capped at a ceiling taken from the
  selections themselves (`ceiling_from`: a quantile of the scores of the images the
  creator chose). Once a group sits at the ceiling its advantages vanish, so nothing is
  gained by going further than what creators actually picked.
- `ColourAnchor` / reward `flow_anchor`: a per-image penalty on how far the image's
  colour statistics (`color_features`, the same features as `eval flow`'s Fréchet
  distance) lie from the pretraining data, as a Mahalanobis distance, hinged at the
  quantile `margin` of the data's own distances so typical images pay nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import Field

from studio_align.config import Strict
from studio_align.reward_models.color_stats import color_features
from studio_align.verticals.flow.data import make_dataset


class GuardConfig(Strict):
    """Which guards Flow-GRPO runs with (`experiment.run_seed`, the quickstart stage).

    `ceiling_quantile`: cap the `aesthetic` reward at this quantile of the creator's chosen
    images' scores (None = no cap); `anchor_weight`: weight of `flow_anchor`;
    `diversity_weight`: weight of `flow_diversity`; `stop_fd_ratio` / `stop_diversity_ratio`:
    early stopping when, on validation noise, the Fréchet distance to the pretraining
    data exceeds / the diversity falls below that multiple of the base's (None = off),
    checked every `check_every` steps on `check_samples` samples per training tag set,
    keeping the last weights that passed; `stop_reward`: the same check also fails when the
    creator's reward model scores those samples lower on average than the base's, so a
    run whose group advantages led it against its own reward keeps the base; `retries`:
    after a stop, the steps not kept run again from the kept weights at `retry_lr_scale`
    times the learning rate, so a step too long for the bound is tried shorter.

    The defaults are the setting chosen on the validation split for the shipped U-Net
    base (docs/experiments/flow-unet-base-alignment.md, flow-quickstart-stage-timing.md):
    early stopping at FD 1.25x / diversity 0.85x on 16 samples per tag set every 4 steps,
    next to `FlowGRPOConfig`'s 8 steps, learning rate 1e-5 and KL 0.05. On validation the
    win rate is reached in 2-4 steps, and FD passes 1.25x after 6-8; a check (112 samples
    x 20 ODE steps) costs about three Flow-GRPO steps, so checking every 4 steps rather
    than 2 saves a third of the run. The stop is below the 1.3x it guards because the
    16-sample check is noisy. The reward check with one retry at half the learning rate
    was chosen on both bases' validation seeds (flow-64-base-alignment.md). The anchor
    is off: it pulls every image toward the pretraining colours, which is against a taste that is itself off them (`noir` lost
    win rate with it on the DiT base); `off()` is the unguarded run.
    """

    ceiling_quantile: float | None = Field(None, ge=0, le=1)
    anchor_weight: float = Field(0.0, ge=0)
    diversity_weight: float = Field(0.0, ge=0)
    stop_fd_ratio: float | None = Field(1.25, gt=0)
    stop_diversity_ratio: float | None = Field(0.85, ge=0)
    check_every: int = Field(4, ge=1)
    check_samples: int = Field(16, ge=2)
    # on by itself it kept the base in a validation run the 8 steps won 0.85 (the check's
    # 112 samples judge a 4-step move poorly); with `retries` it is on: see below
    stop_reward: bool = True
    # on a failed check, bisect the steps since the last passed one for the latest that
    # passes (`flow_grpo(backtrack=)`), instead of keeping the last passed check's weights;
    # measured effect on 8 validation runs over both bases: mean win 0.78 against 0.75, but
    # twice it kept a step that had gone against the creator (win 0.05 and 0.08 where the
    # stop keeps the base at 0.5; docs/experiments/flow-64-base-alignment.md), so off
    backtrack: bool = False
    # on a stop, run the steps not kept again from the kept weights at `retry_lr_scale`
    # times the learning rate, up to `retries` times (`flow_grpo(retries=)`). Measured
    # effect with `stop_reward` on 8 validation runs over both bases (seeds 101-102): mean
    # win 0.877 against 0.748, no run lower, FD at most 1.25x; a retry alone kept a run
    # that went against its own reward model (win 0.07) and the reward check alone stopped
    # a good one. On the evaluation seeds 0-2 the twelve runs' mean win went from 0.614 to
    # 0.656, with 32x32 `lumen` 0.93 -> 0.79 where the reward model vetoed a good run
    # (docs/experiments/flow-64-base-alignment.md)
    retries: int = Field(1, ge=0)
    retry_lr_scale: float = Field(0.5, gt=0, lt=1)

    @classmethod
    def off(cls) -> GuardConfig:
        """No guard at all (unguarded, Flow-GRPO reward-hacks: docs/experiments/flow-grpo-unguarded.md)."""
        return cls(stop_fd_ratio=None, stop_diversity_ratio=None, stop_reward=False)

    def weights(self, base: dict[str, float]) -> dict[str, float]:
        w = dict(base)
        if self.anchor_weight:
            w["flow_anchor"] = self.anchor_weight
        if self.diversity_weight:
            w["flow_diversity"] = self.diversity_weight
        return w


class ClippedScorer:
    """An aesthetic scorer whose scores are capped at `ceiling` (the `aesthetic` reward
    accepts it as its `aesthetic_model` context value)."""

    def __init__(self, scorer: Any, ceiling: float) -> None:
        self.scorer, self.ceiling = scorer, float(ceiling)

    def score_images(self, images: list[Any], creators: list[str | None] | None = None) -> Any:
        return np.minimum(self.scorer.score_images(images, creators), self.ceiling)


def ceiling_from(scorer: Any, chosen: np.ndarray, creator: str, quantile: float) -> float:
    """The `quantile` of the scorer's scores of the images `creator` chose."""
    s = scorer.score_images(list(chosen), [creator] * len(chosen))
    return float(np.quantile(s, quantile))


class ColourAnchor:
    """Gaussian of reference images' colour features; `penalty` is the hinge of the
    Mahalanobis distance (per feature) above the reference's own `margin` quantile."""

    def __init__(self, reference: np.ndarray, *, margin: float = 0.95, shrink: float = 0.1):
        f = color_features(reference).astype(np.float64)
        self.mu = f.mean(0)
        cov = np.cov(f, rowvar=False)
        cov = (1 - shrink) * cov + shrink * np.diag(np.diag(cov)) + 1e-6 * np.eye(len(cov))
        self.prec = np.linalg.inv(cov)
        self.threshold = float(np.quantile(self.distance_features(f), margin))

    def distance_features(self, f: np.ndarray) -> np.ndarray:
        d = f - self.mu
        return np.sqrt(np.maximum(np.einsum("nd,de,ne->n", d, self.prec, d), 0) / len(self.mu))

    def penalty(self, images: np.ndarray) -> np.ndarray:
        dist = self.distance_features(color_features(images).astype(np.float64))
        return np.maximum(dist - self.threshold, 0.0)


@functools.lru_cache(maxsize=1)
def default_anchor() -> ColourAnchor:
    """The anchor on 1,024 pretraining draws (the same reference as `eval flow`'s FD)."""
    return ColourAnchor(make_dataset(1024, seed=0)[0].astype(np.float32) / 255.0)


def flow_anchor(images: Sequence[Any], colour_anchor: Any = None) -> list[float]:
    """Minus the colour-statistics distance of each image beyond the pretraining data's
    typical range (0 for typical images); `colour_anchor` context: a `ColourAnchor`."""
    anchor = colour_anchor if colour_anchor is not None else default_anchor()
    x = np.stack([np.asarray(im, np.float32) for im in images])
    return (-anchor.penalty(x)).tolist()
