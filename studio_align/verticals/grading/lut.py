"""3D LUTs of a grade: sample the renderer on an RGB lattice, write and read `.cube`.

A colourist's tools (DaVinci Resolve, Premiere, OBS, ffmpeg's `lut3d`) consume the
Adobe/Resolve `.cube` format: `LUT_3D_SIZE N`, then N^3 lines `R G B` in [0, 1] with
red changing fastest, then green, then blue. `grade_lut(params, size)` samples
`renderer.render` at the lattice points, so a LUT is exactly the renderer at those
points and trilinear interpolation in between.

Design choices:
- This works because every operation of `renderer._grade` is per-pixel: each output
  colour is a function of that pixel's input colour and the grade alone (white balance,
  exposure, tone curves weighted by the pixel's own luma, contrast, fade, saturation and
  vibrance weighted by the pixel's own chroma). Spatial operations (sharpening,
  vignette, grain, local contrast) cannot be a LUT and are kept out of the renderer;
  docs/grading.md says so.
- LUT values are written with 6 decimals (about 1e-6, far below 8-bit quantisation).
- `apply_lut` uses Pillow's C `Color3DLUT` filter (trilinear), the fast full-resolution
  path of `studio-align grade`; the tests check it against an independent numpy
  trilinear interpolation and against the exact renderer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter

from studio_align.errors import DataError
from studio_align.verticals.grading.renderer import PARAM_NAMES, render

MIN_SIZE, MAX_SIZE = 2, 65  # Pillow's Color3DLUT accepts 2..65 points per axis


def lattice(size: int) -> np.ndarray:
    """The RGB lattice [size^3, 3] in `.cube` order (red fastest, then green, then blue)."""
    g = np.linspace(0.0, 1.0, size, dtype=np.float32)
    b, gg, r = np.meshgrid(g, g, g, indexing="ij")
    return np.stack([r.ravel(), gg.ravel(), b.ravel()], axis=-1)


def grade_lut(params: np.ndarray, size: int = 33) -> np.ndarray:
    """The grade `params` [P] sampled on the lattice: [size^3, 3] in `.cube` order."""
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise DataError(f"LUT size {size} is outside {MIN_SIZE}..{MAX_SIZE}")
    pts = lattice(size).reshape(size * size, size, 3)
    out = render(pts, np.asarray(params, np.float32), backend="numpy")
    return np.asarray(out, np.float32).reshape(-1, 3)


def write_cube(
    path: str | Path, table: np.ndarray, *, title: str = "studio-align grade", comment: str = ""
) -> Path:
    """Write a `.cube` file from a [N^3, 3] table in `.cube` order."""
    table = np.asarray(table, np.float64)
    size = round(len(table) ** (1 / 3))
    if size**3 != len(table) or table.shape[-1] != 3:
        raise DataError(f"LUT table of shape {table.shape} is not N^3 x 3")
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    lines = [f'TITLE "{title}"']
    lines += [f"# {c}" for c in comment.splitlines() if c]
    lines += [f"LUT_3D_SIZE {size}", "DOMAIN_MIN 0.0 0.0 0.0", "DOMAIN_MAX 1.0 1.0 1.0"]
    body = "\n".join(f"{r:.6f} {g:.6f} {b:.6f}" for r, g, b in np.clip(table, 0.0, 1.0))
    p.write_text("\n".join(lines) + "\n" + body + "\n", encoding="ascii")
    return p


def read_cube(path: str | Path) -> np.ndarray:
    """Read a 3D `.cube` file (domain [0, 1]) into a [N, N, N, 3] array indexed [b, g, r]."""
    p = Path(path)
    size, rows = None, []
    for i, raw in enumerate(p.read_text(encoding="ascii").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith("TITLE"):
            continue
        key = line.split()[0]
        if key == "LUT_3D_SIZE":
            size = int(line.split()[1])
        elif key in ("DOMAIN_MIN", "DOMAIN_MAX"):
            want = 0.0 if key == "DOMAIN_MIN" else 1.0
            if any(float(v) != want for v in line.split()[1:]):
                raise DataError(f"{p}:{i}: only the [0, 1] domain is supported")
        elif key == "LUT_1D_SIZE":
            raise DataError(f"{p}:{i}: a 1D LUT, not a 3D one")
        else:
            try:
                rows.append([float(v) for v in line.split()])
            except ValueError:
                raise DataError(f"{p}:{i}: cannot parse {line!r}") from None
    if size is None or len(rows) != size**3:
        raise DataError(f"{p}: expected LUT_3D_SIZE N and N^3 rows, got {len(rows)} rows")
    return np.asarray(rows, np.float32).reshape(size, size, size, 3)


def apply_lut(image: Image.Image, table: np.ndarray) -> Image.Image:
    """Apply a [N^3, 3] `.cube`-order table to an RGB image (Pillow, trilinear, in C)."""
    size = round(len(table) ** (1 / 3))
    flat = np.asarray(table, np.float32).ravel().tolist()
    return image.filter(ImageFilter.Color3DLUT(size, flat, channels=3))


def describe_grade(params: np.ndarray) -> str:
    """`exposure=+0.120 contrast=-0.050 ...` for the `.cube` header comment."""
    return " ".join(f"{k}={float(v):+.3f}" for k, v in zip(PARAM_NAMES, params, strict=True))
