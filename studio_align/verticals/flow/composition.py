"""Key and composition statistics of images, and the `flow-composition` encoder.

`composition_stats` reads a few pixel statistics: the mean luma (key), the luma
contrast, clipped pixels, and where the subject sits (the centroid of the saliency
`|luma - border median|`, i.e. what differs from the backdrop), plus a 3x3 grid of mean
luma. `CompositionEncoder` (`flow-composition`, registered by this vertical's plugin) is
the colour-statistics vector plus these statistics, so a Bradley-Terry head can learn
where a creator wants the subject, which colour statistics alone cannot see. It is also
the feature space of `flow_diversity` and of `eval flow`'s diversity figure.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from studio_align.reward_models.color_stats import color_features, resize_batch

_LUMA = np.array([0.2126, 0.7152, 0.0722], np.float32)
COMPOSITION_NAMES = ("luma", "contrast", "cx", "cy", "offcentre", "salience",
                     *(f"grid{i}" for i in range(9)))  # fmt: skip


def composition_stats(images: np.ndarray) -> dict[str, np.ndarray]:
    """Key and subject-position statistics of images [N, H, W, 3] in [0, 1]."""
    x = np.clip(np.asarray(images, np.float32), 0.0, 1.0)
    n, h, w, _ = x.shape
    luma = x @ _LUMA
    border = np.concatenate([luma[:, 0, :], luma[:, -1, :], luma[:, :, 0], luma[:, :, -1]], axis=1)
    sal = np.abs(luma - np.median(border, axis=1)[:, None, None])
    mass = sal.sum((1, 2)) + 1e-6
    xs = (np.arange(w, dtype=np.float32) + 0.5) / w
    ys = (np.arange(h, dtype=np.float32) + 0.5) / h
    cx = (sal.sum(1) * xs).sum(1) / mass
    cy = (sal.sum(2) * ys).sum(1) / mass
    grid = luma[:, : h - h % 3, : w - w % 3].reshape(n, 3, h // 3, 3, w // 3).mean((2, 4))
    out = {
        "luma": luma.mean((1, 2)),
        "contrast": luma.std((1, 2)),
        "cx": cx,
        "cy": cy,
        "offcentre": np.abs(cx - 0.5) * 2.0,
        "salience": sal.mean((1, 2)),
        "clip_white": (luma > 0.98).mean((1, 2)),
        "clip_black": (luma < 0.02).mean((1, 2)),
    }
    for i in range(9):
        out[f"grid{i}"] = grid.reshape(n, 9)[:, i]
    return out


def composition_features(images: np.ndarray) -> np.ndarray:
    """`COMPOSITION_NAMES` statistics of images [N, H, W, 3] as float32 [N, 15]."""
    s = composition_stats(images)
    return np.stack([s[k] for k in COMPOSITION_NAMES], axis=1).astype(np.float32)


class CompositionEncoder:
    """`Encoder`: colour statistics + composition statistics, numpy only."""

    def __init__(self, size: int = 32) -> None:
        self.size = int(size)
        self.dim = len(color_features(np.zeros((1, 8, 8, 3)))[0]) + len(COMPOSITION_NAMES)
        self.identity = f"flow-composition:v1:size={self.size}"

    def encode_images(self, images: list[Any]) -> np.ndarray:
        if not images:
            return np.zeros((0, self.dim), np.float32)
        x = resize_batch(list(images), self.size)
        return np.concatenate([color_features(x), composition_features(x)], axis=1)
