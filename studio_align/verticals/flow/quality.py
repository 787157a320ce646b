"""Sample quality of a flow generator against real images of the same tag sets.

Three figures, each a ratio of generated to real (real = 1.0 by definition), so they read
the same at any image size and for any data:

- **seam ratio**: mean absolute pixel step across the boundaries of a `patch` grid over
  the mean step everywhere else. A patch-token model that does not stitch its tokens
  draws the grid (ratio > 1); in real images the grid is arbitrary (index ~1).
- **noise ratio**: high-frequency energy, the mean square of each image minus its 3x3
  box blur. Residual sampler noise and speckle raise it; flat blank frames lower it.
- **tag recognisability**: an independent classifier's accuracy at naming the tag set of
  generated images over its accuracy on fresh real ones. The classifier (`TagClassifier`,
  ridge regression on downsampled pixels and edge magnitudes) is fitted on real images
  only and never sees a generated one, so it asks "does this look like the data of its
  tag set?", not "does it match the generator's habits?".

Design choices: plain numpy, no learned feature extractor (nothing to download, same
figures on every machine); the caller supplies the real images, so this module does not
know where data comes from.
"""

from __future__ import annotations

import numpy as np


def seam_index(images: np.ndarray, patch: int) -> float:
    """Mean |step| across `patch`-grid boundaries over the mean |step| inside patches,
    both axes, of images [N, H, W, C] in [0, 1]."""
    x = np.asarray(images, np.float64)
    dx = np.abs(np.diff(x, axis=2)).mean((0, 1, 3))  # [W-1]: step between column j and j+1
    dy = np.abs(np.diff(x, axis=1)).mean((0, 2, 3))  # [H-1]
    steps = np.concatenate([dx, dy])
    seam = np.concatenate([(np.arange(len(dx)) + 1) % patch == 0,
                           (np.arange(len(dy)) + 1) % patch == 0])  # fmt: skip
    if not seam.any() or seam.all():
        raise ValueError(f"seam_index: patch {patch} gives no boundary inside {x.shape[1:3]}")
    return float(steps[seam].mean() / max(steps[~seam].mean(), 1e-12))


def highfreq_energy(images: np.ndarray) -> float:
    """Mean square of images [N, H, W, C] minus their 3x3 box blur (edge-padded)."""
    x = np.asarray(images, np.float64)
    p = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), mode="edge")
    h, w = x.shape[1:3]
    blur = sum(p[:, i : i + h, j : j + w] for i in range(3) for j in range(3)) / 9.0
    return float(((x - blur) ** 2).mean())


def _features(images: np.ndarray, side: int = 16) -> np.ndarray:
    """Downsampled colour pixels plus edge magnitudes [N, D] of images [N, H, W, 3]."""
    x = np.asarray(images, np.float32)
    n, h, w, c = x.shape
    f = h // side if h >= side and h % side == 0 else 1
    small = x.reshape(n, h // f, f, w // f, f, c).mean((2, 4))
    grey = small.mean(-1)
    gx = np.abs(np.diff(grey, axis=2, append=grey[:, :, -1:]))
    gy = np.abs(np.diff(grey, axis=1, append=grey[:, -1:, :]))
    return np.concatenate([small.reshape(n, -1), (gx + gy).reshape(n, -1)], axis=1)


class TagClassifier:
    """One-vs-rest ridge regression from `_features` to tag-set ids, fitted on real images."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, *, l2: float = 10.0) -> None:
        f = _features(images)
        self.mu, self.sd = f.mean(0), f.std(0) + 1e-3
        z = np.concatenate([(f - self.mu) / self.sd, np.ones((len(f), 1), np.float32)], 1)
        self.classes = np.unique(labels)
        y = (labels[:, None] == self.classes[None]).astype(np.float64) * 2 - 1
        reg = l2 * np.eye(z.shape[1])
        reg[-1, -1] = 0.0  # the bias is not shrunk
        self.w = np.linalg.solve(z.T @ z + reg, z.T @ y)

    def predict(self, images: np.ndarray) -> np.ndarray:
        f = (_features(images) - self.mu) / self.sd
        z = np.concatenate([f, np.ones((len(f), 1), np.float32)], 1)
        return np.asarray(self.classes[np.argmax(z @ self.w, axis=1)])

    def accuracy(self, images: np.ndarray, labels: np.ndarray) -> float:
        return float(np.mean(self.predict(images) == labels))


def fit_tag_classifier(real: np.ndarray) -> TagClassifier:
    """A classifier over the tag sets of real images grouped as [S, N, H, W, 3]."""
    s, n = real.shape[:2]
    return TagClassifier(real.reshape(s * n, *real.shape[2:]), np.repeat(np.arange(s), n))


def sample_quality(
    generated: np.ndarray, real: np.ndarray, classifier: TagClassifier, *, patch: int
) -> dict[str, float | None]:
    """Every figure of the module docstring for `generated` against `real`, both
    [S, N, H, W, 3] in [0, 1] with the same S tag sets in the classifier's order (real
    images fresh: not those the classifier was fitted on). The seam ratio is `None` where
    the `patch` grid has no boundary inside the image (a patch as large as the image):
    such a model has no seams to draw."""
    if generated.shape[0] != real.shape[0] or generated.shape[2:] != real.shape[2:]:
        raise ValueError(f"sample_quality: generated {generated.shape} vs real {real.shape}")
    flat_g = generated.reshape(-1, *generated.shape[2:])
    flat_r = real.reshape(-1, *real.shape[2:])
    acc_g = classifier.accuracy(flat_g, np.repeat(np.arange(len(generated)), generated.shape[1]))
    acc_r = classifier.accuracy(flat_r, np.repeat(np.arange(len(real)), real.shape[1]))
    size = min(flat_g.shape[1:3])
    return {
        "seam_ratio": (
            seam_index(flat_g, patch) / seam_index(flat_r, patch) if 1 < patch < size else None
        ),
        "noise_ratio": highfreq_energy(flat_g) / highfreq_energy(flat_r),
        "tag_accuracy/generated": acc_g,
        "tag_accuracy/real": acc_r,
        "recognisability": acc_g / max(acc_r, 1e-12),
    }
