"""Procedural images for the two demo verticals, with their tag sets.

- `storyboard`: {close-up, wide, two-shot} x {day, night}: characters as silhouettes
  (head + shoulders/body) on a sky and ground; close-ups fill the frame with one figure,
  two-shots hold two, wide shots put small figures on a horizon; night is a dark sky
  with a moon.
- `product`: {white backdrop, lifestyle} x {front, top-down}: a bottle, box or jar on a
  seamless white backdrop with a soft shadow, or on a table against a coloured wall with a
  plant; top-down views show the product from above on the surface.

Every scene draws its subject's horizontal position uniformly (centred and off-centre
compositions both occur) and a global *key* (exposure/gamma: high-key to low-key), so the
simulated creators' tastes (bright and centred vs dark and off-centre) are present in the
pretraining distribution and alignment only has to shift mass inside it.

Rendering is numpy at 2x supersampling, box-filtered to the output size (anti-aliased
edges). Conditions are a vertical id (1 = storyboard, 2 = product; 0 is the null
condition of classifier-free guidance) and a multi-hot over `TAGS`. `write_png` writes one
image in [0, 1] as an 8-bit PNG (`generate`, selection logs).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from studio_align.errors import ConfigError

VERTICALS = {"storyboard": 1, "product": 2}
TAGS = ("close-up", "wide", "two-shot", "night", "white backdrop", "lifestyle", "top-down")
N_TAGS = 16  # multi-hot width (room for more tags without a new architecture)
TAG_SETS: dict[str, list[tuple[str, ...]]] = {
    "storyboard": [(s, *n) for s in ("close-up", "wide", "two-shot") for n in ((), ("night",))],
    "product": [(b, *v) for b in ("white backdrop", "lifestyle") for v in ((), ("top-down",))],
}
ALL_TAG_SETS: list[tuple[str, tuple[str, ...]]] = [
    (v, ts) for v, sets in TAG_SETS.items() for ts in sets
]


def encode(vertical: str, tags: Sequence[str]) -> tuple[int, np.ndarray]:
    """(vertical id, multi-hot [N_TAGS]); unknown names are a `ConfigError` naming them."""
    if vertical not in VERTICALS:
        raise ConfigError(f"flow: unknown vertical {vertical!r} (known: {', '.join(VERTICALS)})")
    bad = [t for t in tags if t not in TAGS]
    if bad:
        raise ConfigError(f"flow: unknown tag(s) {bad} (known: {', '.join(TAGS)})")
    hot = np.zeros((N_TAGS,), np.float32)
    for t in tags:
        hot[TAGS.index(t)] = 1.0
    return VERTICALS[vertical], hot


def label(vertical: str, tags: Sequence[str]) -> str:
    return f"{vertical}: {', '.join(tags)}"


# -- drawing primitives on [S, S, 3] float canvases ------------------------------------------


def _grid(s: int) -> tuple[np.ndarray, np.ndarray]:
    c = (np.arange(s, dtype=np.float32) + 0.5) / s
    return np.meshgrid(c, c, indexing="xy")  # x, y in [0, 1], y down


def _paint(img: np.ndarray, mask: np.ndarray, color: np.ndarray) -> None:
    m = mask[..., None].astype(np.float32)
    img[:] = img * (1 - m) + m * np.asarray(color, np.float32)


def _ellipse(
    x: np.ndarray, y: np.ndarray, cx: float, cy: float, rx: float, ry: float
) -> np.ndarray:
    return ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 <= 1.0


def _rect(x: np.ndarray, y: np.ndarray, x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
    return (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)


def _figure(img: np.ndarray, x: np.ndarray, y: np.ndarray, cx: float, head_y: float, r: float,
            color: np.ndarray) -> None:  # fmt: skip
    """A silhouette: head circle, neck, and shoulders/body as a wide ellipse below."""
    _paint(img, _ellipse(x, y, cx, head_y, r, r * 1.1), color)
    _paint(img, _rect(x, y, cx - 0.35 * r, head_y, cx + 0.35 * r, head_y + 1.6 * r), color)
    _paint(img, _ellipse(x, y, cx, head_y + 3.2 * r, 1.9 * r, 2.0 * r), color)


# -- scenes --------------------------------------------------------------------------------


def _storyboard(rng: np.random.Generator, tags: Sequence[str], s: int) -> np.ndarray:
    x, y = _grid(s)
    night = "night" in tags
    if night:
        top = rng.uniform([0.0, 0.02, 0.08], [0.08, 0.1, 0.25])
        bot = top + rng.uniform(0.05, 0.18)
    else:
        top = rng.uniform([0.35, 0.55, 0.75], [0.6, 0.8, 0.98])
        bot = rng.uniform([0.75, 0.65, 0.55], [1.0, 0.9, 0.85])
    img = top + (bot - top) * y[..., None]
    if night:  # moon
        _paint(img, _ellipse(x, y, rng.uniform(0.1, 0.9), rng.uniform(0.08, 0.3), 0.07, 0.07),
               rng.uniform([0.85, 0.85, 0.7], [1.0, 1.0, 0.9]))  # fmt: skip
    ground = rng.uniform([0.15, 0.3, 0.1], [0.45, 0.55, 0.3]) * (0.35 if night else 1.0)
    fig = rng.uniform(0.02, 0.18, size=3) if not night else rng.uniform(0.0, 0.05, size=3)
    cx = rng.uniform(0.2, 0.8)
    if "close-up" in tags:
        _paint(img, y > rng.uniform(0.8, 0.95), ground)
        _figure(img, x, y, cx, rng.uniform(0.35, 0.45), rng.uniform(0.16, 0.22), fig)
    elif "two-shot" in tags:
        horizon = rng.uniform(0.65, 0.8)
        _paint(img, y > horizon, ground)
        gap, r = rng.uniform(0.14, 0.2), rng.uniform(0.07, 0.09)
        for dx in (-gap, gap):
            _figure(img, x, y, cx + dx, horizon - rng.uniform(0.25, 0.3), r, fig)
    else:  # wide
        horizon = rng.uniform(0.6, 0.75)
        _paint(img, y > horizon, ground)
        hill = rng.uniform(0.1, 0.9)
        _paint(img, _ellipse(x, y, hill, horizon, rng.uniform(0.2, 0.35), 0.12), ground * 0.8)
        for k in range(int(rng.integers(1, 3))):
            _figure(img, x, y, cx + 0.1 * k, horizon - 0.09, 0.025, fig)
    return img


def _product(rng: np.random.Generator, tags: Sequence[str], s: int) -> np.ndarray:
    x, y = _grid(s)
    white = "white backdrop" in tags
    if white:
        base = rng.uniform(0.88, 1.0)
        img = np.broadcast_to(base - 0.08 * y[..., None], (s, s, 3)).copy()
    else:
        wall = rng.uniform([0.3, 0.25, 0.2], [0.8, 0.7, 0.65])
        img = np.broadcast_to(wall, (s, s, 3)).copy()
    color = rng.uniform(0.0, 1.0, size=3)
    color[int(rng.integers(3))] = rng.uniform(0.7, 1.0)  # a saturated product colour
    cx = rng.uniform(0.22, 0.78)
    table = rng.uniform([0.35, 0.2, 0.1], [0.6, 0.4, 0.25])
    if "top-down" in tags:
        if not white:
            img[:] = table + 0.04 * np.sin(40 * y + 3 * x)[..., None]  # wood grain
        cy, r = rng.uniform(0.35, 0.65), rng.uniform(0.14, 0.22)
        _paint(img, _ellipse(x, y, cx + 0.03, cy + 0.03, r, r), img.mean((0, 1)) * 0.6)  # shadow
        _paint(img, _ellipse(x, y, cx, cy, r, r), color)
        _paint(img, _ellipse(x, y, cx, cy, 0.6 * r, 0.6 * r), color * 0.75)
        if not white:
            _paint(img, _rect(x, y, 0.05, 0.05, 0.2, 0.3), np.array([0.9, 0.9, 0.85]))  # a card
        return img
    floor = rng.uniform(0.65, 0.78)
    if not white:
        _paint(img, y > floor, table)
        _paint(img, _ellipse(x, y, 1.0 - cx, floor - 0.12, 0.07, 0.12), np.array([0.2, 0.5, 0.2]))
    w, h = rng.uniform(0.08, 0.16), rng.uniform(0.25, 0.45)
    _paint(img, _ellipse(x, y, cx + 0.04, floor, w * 1.6, 0.03), img.mean((0, 1)) * 0.55)
    _paint(img, _rect(x, y, cx - w, floor - h, cx + w, floor), color)
    if rng.uniform() < 0.5:  # a bottle: neck and cap
        _paint(img, _rect(x, y, cx - 0.35 * w, floor - h - 0.1, cx + 0.35 * w, floor - h), color)
        _paint(img, _rect(x, y, cx - 0.4 * w, floor - h - 0.14, cx + 0.4 * w, floor - h - 0.1),
               np.array([0.1, 0.1, 0.1]))  # fmt: skip
    _paint(img, _rect(x, y, cx - 0.6 * w, floor - 0.65 * h, cx + 0.6 * w, floor - 0.35 * h),
           np.array([0.95, 0.95, 0.92]))  # label  # fmt: skip
    return img


def render(
    rng: np.random.Generator, vertical: str, tags: Sequence[str], size: int = 32
) -> np.ndarray:
    """One image [size, size, 3] float in [0, 1] of `vertical` with `tags`."""
    s = 2 * size
    img = _storyboard(rng, tags, s) if vertical == "storyboard" else _product(rng, tags, s)
    key = rng.uniform(-1.0, 1.0)  # low-key (-1) .. high-key (+1)
    img = np.clip(img, 0.0, 1.0) ** (2.0 ** (-1.1 * key))
    img = img.reshape(size, 2, size, 2, 3).mean((1, 3))
    return np.clip(img, 0.0, 1.0).astype(np.float32)


def make_dataset(
    n: int, *, seed: int = 0, size: int = 32,
    tag_sets: Sequence[tuple[str, tuple[str, ...]]] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """`n` images uint8 [n, size, size, 3], vertical ids [n], multi-hot tags [n, N_TAGS];
    tag sets drawn uniformly from `tag_sets` (default: all of `ALL_TAG_SETS`)."""
    rng = np.random.default_rng(seed)
    sets = list(tag_sets or ALL_TAG_SETS)
    images = np.empty((n, size, size, 3), np.uint8)
    verts = np.empty((n,), np.int32)
    tags = np.empty((n, N_TAGS), np.float32)
    for i in range(n):
        v, ts = sets[int(rng.integers(len(sets)))]
        images[i] = np.round(render(rng, v, ts, size) * 255)
        verts[i], tags[i] = encode(v, ts)
    return images, verts, tags


def to_model_space(images_uint8: np.ndarray) -> np.ndarray:
    """uint8 [0, 255] -> float32 [-1, 1]."""
    return images_uint8.astype(np.float32) / 127.5 - 1.0


def write_png(image: np.ndarray, path: Path) -> None:
    """Image in [0, 1] [H, W, 3] as an 8-bit PNG (the parent folders are made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.round(np.clip(image, 0, 1) * 255).astype(np.uint8)).save(path)


def real_by_tag_set(
    tag_sets: Sequence[tuple[str, Sequence[str]]], n_per_set: int, *, seed: int, size: int = 32
) -> np.ndarray:
    """`n_per_set` fresh images per tag set [S, N, size, size, 3] in [0, 1] (8-bit
    quantised, as the pretraining data is); `seed` picks the draws."""
    rng = np.random.default_rng(seed)
    return np.stack(
        [np.stack([np.round(render(rng, v, ts, size) * 255) / 255 for _ in range(n_per_set)])
         for v, ts in tag_sets]
    ).astype(np.float32)  # fmt: skip
