"""The built-in `color-stats` encoder: a fixed, cheap, interpretable image embedding.

Features are computed on a small fixed-size copy of each image (default 96x96, bilinear)
so a batch is one stacked array and every statistic is vectorised over it. The vector is:

- scalars (`SCALAR_NAMES`): brightness, contrast, shadow / mid / highlight levels (5th,
  50th, 95th percentile of lightness), saturation, chroma spread, warmth (mean R-B),
  tint (mean G - (R+B)/2), Lab a*/b* means, sharpness (mean |Laplacian|), clipped-black
  and clipped-white fractions, Hasler-Suesstrunk colourfulness;
- a 16-bin lightness histogram and 8-bin a*/b* histograms (fractions).

`color_statistics` (the scalars as a dict of arrays) is public: the simulated creator's
hidden taste in the grading demo is a utility over exactly these statistics, so a head
over this encoder can in principle recover it, which is what the demo measures.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from studio_align.reward_models.images import as_rgb_image

SCALAR_NAMES = (
    "brightness",
    "contrast",
    "shadows",
    "midtones",
    "highlights",
    "saturation",
    "chroma_spread",
    "warmth",
    "tint",
    "lab_a",
    "lab_b",
    "sharpness",
    "clip_black",
    "clip_white",
    "colorfulness",
)
L_BINS, AB_BINS = 16, 8
FEATURE_DIM = len(SCALAR_NAMES) + L_BINS + 2 * AB_BINS
_LUMA = np.array([0.2126, 0.7152, 0.0722], dtype=np.float32)


def srgb_to_lab(rgb: np.ndarray) -> np.ndarray:
    """sRGB in [0,1] (..., 3) -> CIE Lab (D65), L in [0,100]."""
    rgb = np.clip(rgb, 0.0, 1.0).astype(np.float32)
    lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    m = np.array(
        [[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]],
        dtype=np.float32,
    )
    xyz = lin @ m.T / np.array([0.95047, 1.0, 1.08883], dtype=np.float32)
    eps = 216 / 24389
    f = np.where(xyz > eps, np.cbrt(xyz), (24389 / 27 * xyz + 16) / 116)
    L = 116 * f[..., 1] - 16
    a = 500 * (f[..., 0] - f[..., 1])
    b = 200 * (f[..., 1] - f[..., 2])
    return np.stack([L, a, b], axis=-1)


def color_statistics(batch: np.ndarray) -> dict[str, np.ndarray]:
    """Scalar colour statistics of a batch of sRGB images [N, H, W, 3] in [0, 1]."""
    x = np.clip(np.asarray(batch, dtype=np.float32), 0.0, 1.0)
    if x.ndim == 3:
        x = x[None]
    n = x.shape[0]
    lab = srgb_to_lab(x)
    L = lab[..., 0].reshape(n, -1) / 100.0
    a = lab[..., 1].reshape(n, -1) / 100.0
    b = lab[..., 2].reshape(n, -1) / 100.0
    chroma = np.sqrt(a * a + b * b)
    p5, p50, p95 = np.percentile(L, [5, 50, 95], axis=1)
    r, g, bl = (x[..., i].reshape(n, -1) for i in range(3))
    mx, mn = x.max(-1).reshape(n, -1), x.min(-1).reshape(n, -1)
    sat = np.where(mx > 1e-4, (mx - mn) / np.maximum(mx, 1e-4), 0.0)
    luma = x @ _LUMA
    lap = (
        4 * luma[:, 1:-1, 1:-1]
        - luma[:, :-2, 1:-1]
        - luma[:, 2:, 1:-1]
        - luma[:, 1:-1, :-2]
        - luma[:, 1:-1, 2:]
    )
    rg, yb = r - g, 0.5 * (r + g) - bl
    colorful = np.sqrt(rg.std(1) ** 2 + yb.std(1) ** 2) + 0.3 * np.sqrt(
        rg.mean(1) ** 2 + yb.mean(1) ** 2
    )
    return {
        "brightness": L.mean(1),
        "contrast": L.std(1),
        "shadows": p5,
        "midtones": p50,
        "highlights": p95,
        "saturation": sat.mean(1),
        "chroma_spread": chroma.std(1),
        "warmth": (r - bl).mean(1),
        "tint": (g - 0.5 * (r + bl)).mean(1),
        "lab_a": a.mean(1),
        "lab_b": b.mean(1),
        "sharpness": np.abs(lap).reshape(n, -1).mean(1),
        "clip_black": (luma.reshape(n, -1) < 0.02).mean(1),
        "clip_white": (luma.reshape(n, -1) > 0.98).mean(1),
        "colorfulness": colorful,
    }


def _histograms(values: np.ndarray, lo: float, hi: float, bins: int) -> np.ndarray:
    n = values.shape[0]
    idx = np.clip(((values - lo) / (hi - lo) * bins).astype(np.int64), 0, bins - 1)
    idx = idx + np.arange(n)[:, None] * bins
    counts = np.bincount(idx.ravel(), minlength=n * bins).reshape(n, bins)
    return (counts / values.shape[1]).astype(np.float32)


def color_features(batch: np.ndarray) -> np.ndarray:
    """Feature vectors [N, FEATURE_DIM] float32 of a batch of images [N, H, W, 3]."""
    x = np.clip(np.asarray(batch, dtype=np.float32), 0.0, 1.0)
    if x.ndim == 3:
        x = x[None]
    n = x.shape[0]
    stats = color_statistics(x)
    lab = srgb_to_lab(x).reshape(n, -1, 3)
    hl = _histograms(lab[..., 0], 0.0, 100.0, L_BINS)
    ha = _histograms(lab[..., 1], -60.0, 60.0, AB_BINS)
    hb = _histograms(lab[..., 2], -60.0, 60.0, AB_BINS)
    scalars = np.stack([stats[k] for k in SCALAR_NAMES], axis=1).astype(np.float32)
    return np.concatenate([scalars, hl, ha, hb], axis=1)


def resize_batch(images: list[Image.Image | np.ndarray], size: int) -> np.ndarray:
    """Stack images resized to size x size as float32 [N, size, size, 3] in [0, 1]."""
    out = np.empty((len(images), size, size, 3), dtype=np.float32)
    for i, im in enumerate(images):
        if (
            isinstance(im, np.ndarray)
            and im.shape[:2] == (size, size)
            and im.dtype in (np.float32, np.float64)
        ):
            out[i] = im[..., :3]
            continue
        pil = as_rgb_image(im)
        if pil.size != (size, size):
            pil = pil.resize((size, size), Image.Resampling.BILINEAR, reducing_gap=2.0)
        out[i] = np.asarray(pil, dtype=np.float32) / 255.0
    return out


class ColorStatsEncoder:
    """`Encoder` over colour statistics; deterministic, no weights, numpy only."""

    def __init__(self, size: int = 96) -> None:
        if size < 8:
            raise ValueError("color-stats size must be >= 8")
        self.size = int(size)
        self.dim = FEATURE_DIM
        self.identity = f"color-stats:v1:size={self.size}"

    def encode_images(self, images: list[Image.Image | np.ndarray]) -> np.ndarray:
        if not images:
            return np.zeros((0, self.dim), dtype=np.float32)
        return color_features(resize_batch(images, self.size))

    def __repr__(self) -> str:
        return f"ColorStatsEncoder(size={self.size})"
