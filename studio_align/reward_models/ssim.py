"""Structural similarity (SSIM) on luma, vectorised over a batch; the identity reward.

Box-window SSIM (7x7, via summed-area tables) of Wang et al. 2004 with the usual
constants (K1 = 0.01, K2 = 0.03, L = 1). Images of different sizes are compared after
resizing the output to the source's size; both are first reduced to at most `max_side`
pixels on the long side, which keeps the reward cheap inside a GRPO rollout.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from studio_align.reward_models.images import as_float_array

_LUMA = np.array([0.2126, 0.7152, 0.0722], dtype=np.float32)
C1, C2 = 0.01**2, 0.03**2


def _box(x: np.ndarray, k: int) -> np.ndarray:
    """Mean over k x k windows ('valid'), batched over the leading axis."""
    s = np.cumsum(np.cumsum(np.pad(x, ((0, 0), (1, 0), (1, 0))), axis=1), axis=2)
    return (s[:, k:, k:] - s[:, :-k, k:] - s[:, k:, :-k] + s[:, :-k, :-k]) / (k * k)


def ssim_batch(a: np.ndarray, b: np.ndarray, *, window: int = 7) -> np.ndarray:
    """Mean SSIM [N] between same-shaped batches [N, H, W, 3] (or [N, H, W] luma)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    if a.ndim == 4:
        a, b = a @ _LUMA, b @ _LUMA
    k = min(window, a.shape[1], a.shape[2])
    mu_a, mu_b = _box(a, k), _box(b, k)
    saa = _box(a * a, k) - mu_a**2
    sbb = _box(b * b, k) - mu_b**2
    sab = _box(a * b, k) - mu_a * mu_b
    num = (2 * mu_a * mu_b + C1) * (2 * sab + C2)
    den = (mu_a**2 + mu_b**2 + C1) * (saa + sbb + C2)
    return (num / den).reshape(a.shape[0], -1).mean(1)


def _prep(im: object, size: tuple[int, int] | None, max_side: int) -> np.ndarray:
    pil = Image.fromarray((np.clip(as_float_array(im), 0, 1) * 255 + 0.5).astype(np.uint8))  # type: ignore[arg-type]
    if size is None:
        s = min(1.0, max_side / max(pil.size))
        size = (max(8, round(pil.width * s)), max(8, round(pil.height * s)))
    if pil.size != size:
        pil = pil.resize(size, Image.Resampling.BILINEAR)
    return np.asarray(pil, np.float32) / 255.0


def ssim_pairs(outputs: list[object], sources: list[object], *, max_side: int = 128) -> np.ndarray:
    """SSIM of each output to its source (any sizes, PIL or arrays)."""
    out = np.empty(len(outputs), np.float64)
    for i, (o, s) in enumerate(zip(outputs, sources, strict=True)):
        src = _prep(s, None, max_side)
        dst = _prep(o, (src.shape[1], src.shape[0]), max_side)
        out[i] = ssim_batch(dst[None], src[None])[0]
    return out
