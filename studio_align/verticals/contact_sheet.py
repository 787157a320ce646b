"""Labelled image grids for reports: a person must see which column is which.

`contact_sheet(cells, columns=..., rows=...)` lays images out in a grid at a chosen cell
size, with the column labels drawn above and row labels at the left, in PIL's default
font (a scalable font ships with Pillow, so nothing is looked up on the machine). Cells
are enlarged with nearest-neighbour by default (a 32-px sample stays a 32-px sample, its
pixels visible, not smoothed into something it is not), bilinear with `smooth=True`
(photos, where a grade's colour matters and pixel blocks distract), and reduced bilinear.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

BACKGROUND = (255, 255, 255)
INK = (20, 20, 20)


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _to_pil(img: np.ndarray, cell: int, smooth: bool) -> Image.Image:
    im = Image.fromarray((np.clip(img, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8))
    if im.size == (cell, cell):
        return im
    blocky = cell >= max(im.size) and not smooth
    return im.resize(
        (cell, cell), Image.Resampling.NEAREST if blocky else Image.Resampling.BILINEAR
    )


def contact_sheet(
    cells: Sequence[Sequence[np.ndarray]], *, columns: Sequence[str],
    rows: Sequence[str] | None = None, title: str | None = None, cell: int = 160,
    pad: int = 6, font_size: int = 14, smooth: bool = False,
) -> Image.Image:  # fmt: skip
    """Images `cells[r][c]` ([H, W, 3] floats in [0, 1]) as one labelled RGB image."""
    n_rows, n_cols = len(cells), len(columns)
    if any(len(r) != n_cols for r in cells):
        raise ValueError(f"contact_sheet: every row needs {n_cols} cells ({list(columns)})")
    if rows is not None and len(rows) != n_rows:
        raise ValueError(f"contact_sheet: {len(rows)} row labels for {n_rows} rows")
    font = _font(font_size)
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))

    def width(s: str) -> int:
        return int(probe.textlength(s, font=font))

    line = font_size + 6
    left = (max(width(r) for r in rows) + 2 * pad) if rows else pad
    top = pad + (line if title else 0) + line
    w = left + n_cols * (cell + pad)
    h = top + n_rows * (cell + pad)
    sheet = Image.new("RGB", (w, h), BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    if title:
        draw.text((pad, pad), title, fill=INK, font=font)
    for j, name in enumerate(columns):
        x = left + j * (cell + pad)
        draw.text((x + max(0, (cell - width(name)) // 2), top - line), name, fill=INK, font=font)
    for i, row in enumerate(cells):
        y = top + i * (cell + pad)
        if rows:
            draw.text((pad, y + cell // 2 - font_size // 2), rows[i], fill=INK, font=font)
        for j, img in enumerate(row):
            sheet.paste(_to_pil(np.asarray(img), cell, smooth), (left + j * (cell + pad), y))
    return sheet


def save_sheet(sheet: Image.Image, path: str | Path) -> Path:
    """Write a sheet as PNG (parent folders created); returns the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(p, optimize=True)
    return p
