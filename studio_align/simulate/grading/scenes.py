"""Procedural source images for the grading demo: varied, cheap, deterministic per seed.

Six scene kinds (sky, landscape, portrait, neon street, interior, seascape) drawn with
numpy coordinate grids: gradients, soft shapes, glows, value noise for texture. Each
scene is then given a random "camera" deviation (exposure, white balance, contrast,
saturation), so sources differ in what grading they need and the policy must look at
the source, not just emit one fixed look.
"""

from __future__ import annotations

import numpy as np

SCENE_KINDS = ("sky", "landscape", "portrait", "neon", "interior", "seascape")


def _noise(rng: np.random.Generator, h: int, w: int, cells: int) -> np.ndarray:
    """Smooth value noise in [0, 1] (bilinear upsampling of a random grid)."""
    g = rng.random((cells + 1, cells + 1)).astype(np.float32)
    ys = np.linspace(0, cells, h, dtype=np.float32)
    xs = np.linspace(0, cells, w, dtype=np.float32)
    y0 = np.minimum(ys.astype(int), cells - 1)
    x0 = np.minimum(xs.astype(int), cells - 1)
    fy, fx = (ys - y0)[:, None], (xs - x0)[None, :]
    a = g[y0][:, x0]
    b = g[y0][:, x0 + 1]
    c = g[y0 + 1][:, x0]
    d = g[y0 + 1][:, x0 + 1]
    return a * (1 - fy) * (1 - fx) + b * (1 - fy) * fx + c * fy * (1 - fx) + d * fy * fx


def _lerp(c0: np.ndarray, c1: np.ndarray, t: np.ndarray) -> np.ndarray:
    return c0 * (1 - t[..., None]) + c1 * t[..., None]


def _col(*rgb: float) -> np.ndarray:
    return np.array(rgb, dtype=np.float32)


def _blob(yy: np.ndarray, xx: np.ndarray, cy: float, cx: float, ry: float, rx: float) -> np.ndarray:
    d = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2
    return np.clip(1.5 - d, 0.0, 1.0) ** 1.0 * (d < 1.5)


def make_scene(
    rng: np.random.Generator, size: tuple[int, int] = (96, 96), kind: str | None = None
) -> np.ndarray:
    """One procedural image [H, W, 3] float32 in [0, 1]."""
    h, w = size
    kind = kind or SCENE_KINDS[int(rng.integers(len(SCENE_KINDS)))]
    yy, xx = np.meshgrid(
        np.linspace(0, 1, h, dtype=np.float32),
        np.linspace(0, 1, w, dtype=np.float32),
        indexing="ij",
    )
    n1, n2 = _noise(rng, h, w, 6), _noise(rng, h, w, 24)
    r = rng.random
    if kind in ("sky", "landscape", "seascape"):
        top = _col(0.15 + 0.2 * r(), 0.3 + 0.2 * r(), 0.6 + 0.3 * r())
        bottom = _col(0.7 + 0.3 * r(), 0.6 + 0.3 * r(), 0.5 + 0.3 * r())
        img = _lerp(top, bottom, yy)
        sun = _blob(yy, xx, 0.15 + 0.4 * r(), r(), 0.08, 0.08)
        img = img + sun[..., None] * _col(1.0, 0.9, 0.6) * 0.8
        clouds = np.clip(n1 * 1.6 - 0.7, 0, 1) * (yy < 0.6)
        img = _lerp(img, _col(0.95, 0.95, 0.97), clouds * 0.7)
        if kind == "landscape":
            for layer in range(3):
                ridge = (
                    0.45
                    + 0.12 * layer
                    + 0.1 * np.sin(xx * (4 + 3 * r()) + 6 * r()) * (1 - 0.3 * layer)
                )
                shade = _col(0.2 + 0.1 * r(), 0.3 + 0.15 * r() - 0.05 * layer, 0.2 + 0.1 * r()) * (
                    1 - 0.25 * layer
                )
                m = (yy > ridge).astype(np.float32)
                img = _lerp(img, shade + 0.15 * n2[..., None], m)
        elif kind == "seascape":
            horizon = 0.5 + 0.1 * r()
            sea = _lerp(
                _col(0.1, 0.3 + 0.2 * r(), 0.45),
                _col(0.05, 0.15, 0.25),
                (yy - horizon) / (1 - horizon),
            )
            sea = sea + 0.1 * (n2[..., None] - 0.5)
            img = np.where((yy > horizon)[..., None], sea, img)
    elif kind == "portrait":
        bg = _lerp(_col(r(), r(), r()) * 0.6, _col(r(), r(), r()) * 0.4, n1)
        skin = _col(0.75 + 0.2 * r(), 0.55 + 0.15 * r(), 0.45 + 0.1 * r())
        face = _blob(yy, xx, 0.42, 0.5, 0.22, 0.16)
        body = _blob(yy, xx, 1.0, 0.5, 0.35, 0.4)
        hair = _blob(yy, xx, 0.3, 0.5, 0.2, 0.2) * (yy < 0.33)
        img = _lerp(bg, _col(r(), r(), r()) * 0.7, np.clip(body * 2, 0, 1))
        shading = 0.75 + 0.35 * (1 - xx)
        img = _lerp(img, skin * shading[..., None], np.clip(face * 2, 0, 1))
        img = _lerp(img, _col(0.15, 0.1, 0.07) * (1 + r()), np.clip(hair * 2, 0, 1))
    elif kind == "neon":
        img = _lerp(_col(0.02, 0.02, 0.06), _col(0.08, 0.06, 0.1), yy) + 0.05 * n2[..., None]
        for _ in range(int(rng.integers(4, 9))):
            color = _col(*(rng.permutation([1.0, 0.2 + 0.5 * r(), 0.1])))
            cy, cx = 0.15 + 0.5 * r(), r()
            glow = np.exp(-(((yy - cy) / 0.08) ** 2 + ((xx - cx) / (0.05 + 0.1 * r())) ** 2))
            img = img + glow[..., None] * color * (0.6 + 0.6 * r())
            refl = np.exp(-(((yy - (1.3 - cy)) / 0.2) ** 2 + ((xx - cx) / 0.04) ** 2)) * (yy > 0.7)
            img = img + refl[..., None] * color * 0.3
    else:  # interior
        wall = _col(0.5 + 0.3 * r(), 0.45 + 0.25 * r(), 0.35 + 0.25 * r())
        img = wall * (0.4 + 0.4 * n1[..., None])
        lamp = np.exp(-(((yy - 0.3) / 0.25) ** 2 + ((xx - r()) / 0.25) ** 2))
        img = img + lamp[..., None] * _col(1.0, 0.75, 0.45) * 0.6
        table = (yy > 0.7).astype(np.float32)
        img = _lerp(img, _col(0.3, 0.18, 0.1) + 0.1 * n2[..., None], table)
    img = img + 0.03 * (n2[..., None] - 0.5)
    # camera deviation: exposure, white balance, contrast, saturation
    ev = rng.normal(0.0, 0.45)
    wb = rng.normal(0.0, 0.06)
    img = np.clip(img, 0, 1) ** 2 * 2**ev * _col(1 + wb, 1.0, 1 - wb)
    img = np.sqrt(np.clip(img, 0, 1))
    k = np.exp(rng.normal(0.0, 0.2))
    img = (img - 0.5) * k + 0.5
    luma = img.mean(-1, keepdims=True)
    img = luma + (img - luma) * np.exp(rng.normal(0.0, 0.25))
    return np.clip(img, 0.0, 1.0).astype(np.float32)


def make_scenes(seed: int, n: int, size: tuple[int, int] = (96, 96)) -> np.ndarray:
    """n scenes [n, H, W, 3], cycling through every kind."""
    rng = np.random.default_rng(seed)
    return np.stack([make_scene(rng, size, SCENE_KINDS[i % len(SCENE_KINDS)]) for i in range(n)])
