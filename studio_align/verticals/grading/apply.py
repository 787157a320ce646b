"""`grade`: apply a tuned grade to image files, and export it as `.cube` 3D LUTs.

For each input the grade is predicted on a thumbnail (the model's `thumbnail` size, the
one it was trained at) and applied at full resolution. Output files keep the input's
pixel size, format, EXIF block (so the EXIF orientation tag, and with it how viewers
rotate the picture, is unchanged: the pixels are graded as stored, never transposed)
and ICC profile. The grade works on the encoded values of the file's own colour space,
which is why the profile is carried over untouched.

Design choices:
- Full-resolution application goes through the grade's 3D LUT (`lut.grade_lut`, 33
  points per axis, Pillow's C trilinear filter), the very table `--export-lut` writes:
  what an editor gets in Resolve is what `grade` produced. `exact=True` renders with
  the XLA-compiled renderer instead (slower; the LUT's mean ΔE2000 to it is reported
  by the tests and is well below 1).
- Alpha is kept (the colour channels are graded, alpha copied); greyscale inputs come
  out RGB, since a grade can add colour; 16-bit inputs come out 8-bit (`images.to_rgb`).
- `--reference neutral` predicts one grade for a creator and style on a neutral
  reference chart (a grey ramp under a hue sweep at mid saturation): one LUT for a whole
  shoot, independent of any one image.
- Unreadable inputs are skipped, counted and listed with the reason; the others are
  still graded.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from studio_align.errors import DataError
from studio_align.reward_models.images import to_rgb
from studio_align.training.metrics import Progress
from studio_align.verticals.grading.lut import apply_lut, describe_grade, grade_lut, write_cube
from studio_align.verticals.grading.model import GradingModel, thumbnails
from studio_align.verticals.grading.renderer import render

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".tif", ".tiff", ".webp", ".bmp"}
APPLY_LUT_SIZE = 33


def expand_inputs(inputs: Sequence[str | Path]) -> list[tuple[Path, Path]]:
    """(file, path relative to the output folder) for files and folders (recursive)."""
    out: list[tuple[Path, Path]] = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES:
                    out.append((f, f.relative_to(p)))
        elif p.is_file():
            out.append((p, Path(p.name)))
        else:
            raise DataError(f"{p}: no such file or folder")
    return out


def neutral_reference(size: int = 64) -> np.ndarray:
    """A neutral chart [size, size, 3]: lightness ramp (rows) x hue sweep (columns)."""
    y, x = np.meshgrid(np.linspace(0.05, 0.95, size), np.linspace(0, 1, size), indexing="ij")
    hue = 2 * np.pi * x
    chroma = 0.18 * np.sin(np.pi * y)
    rgb = y[..., None] + chroma[..., None] * np.stack(
        [np.cos(hue), np.cos(hue - 2.094), np.cos(hue + 2.094)], axis=-1
    )
    return np.clip(rgb, 0, 1).astype(np.float32)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "default"


def _split_alpha(im: Image.Image) -> tuple[Image.Image, Image.Image | None]:
    if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
        rgba = im.convert("RGBA")
        return rgba.convert("RGB"), rgba.getchannel("A")
    return (im.copy() if im.mode == "RGB" else to_rgb(im)), None


def _thumb(rgb: Image.Image, size: int) -> np.ndarray:
    small = rgb.copy()
    small.thumbnail((4 * size, 4 * size), Image.Resampling.BILINEAR, reducing_gap=2.0)
    return thumbnails([small], size)[0]


def _save(img: Image.Image, path: Path, fmt: str | None, info: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    kw: dict[str, Any] = {}
    if info.get("exif"):
        kw["exif"] = info["exif"]
    if info.get("icc_profile"):
        kw["icc_profile"] = info["icc_profile"]
    if fmt == "JPEG":
        kw.update(quality=95, subsampling=0)
        if img.mode == "RGBA":
            img = img.convert("RGB")
    elif fmt == "PNG":
        kw["compress_level"] = 3
    img.save(path, format=fmt, **kw)


def grade_files(
    checkpoint: str | Path,
    inputs: Sequence[str | Path],
    out_dir: str | Path | None,
    *,
    creator: str,
    style: str = "",
    export_lut: str | Path | None = None,
    lut_size: int = 33,
    reference: str | None = None,
    exact: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Grade `inputs` into `out_dir` (see the module docstring); returns throughput figures."""
    model = GradingModel.load(checkpoint)
    stats: dict[str, Any] = {"creator": creator, "known_creator": model.knows(creator)}
    if reference is not None:
        if reference != "neutral":
            raise DataError(f"--reference {reference!r}: only 'neutral' is supported")
        if export_lut is None:
            raise DataError("--reference neutral writes a LUT: add --export-lut DIR")
        params = model.predict(neutral_reference(model.thumbnail)[None], [style], [creator])[0]
        name = f"{_slug(creator)}_{_slug(style)}.cube"
        stats["reference_lut"] = str(
            write_cube(
                Path(export_lut) / name, grade_lut(params, lut_size),
                title=f"studio-align {creator} {style}".strip(),
                comment=f"neutral reference; {describe_grade(params)}",
            )
        )  # fmt: skip
    files = expand_inputs(inputs)
    if files and out_dir is None:
        raise DataError("grading images needs --out DIR")
    skipped: dict[str, str] = {}
    pixels, t0 = 0, time.perf_counter()
    bar = Progress(len(files), stage="grade", enabled=progress)
    for i, (src, rel) in enumerate(files):
        try:
            with Image.open(src) as im:
                im.load()
                fmt, info = im.format, {str(k): v for k, v in im.info.items()}
                rgb, alpha = _split_alpha(im)
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombError, DataError) as e:
            skipped[str(src)] = f"cannot decode image ({type(e).__name__}: {e})"
            bar.update(i + 1)
            continue
        params = model.predict(_thumb(rgb, model.thumbnail)[None], [style], [creator])[0]
        table = grade_lut(params, APPLY_LUT_SIZE)
        if exact:
            arr = render(np.asarray(rgb, np.float32) / 255.0, params, backend="jax")
            graded = Image.fromarray((np.clip(arr, 0, 1) * 255 + 0.5).astype(np.uint8))
        else:
            graded = apply_lut(rgb, table)
        if alpha is not None:
            graded = Image.merge("RGBA", (*graded.split(), alpha))
        assert out_dir is not None
        _save(graded, Path(out_dir) / rel, fmt, info)
        if export_lut is not None:
            lut = table if lut_size == APPLY_LUT_SIZE else grade_lut(params, lut_size)
            write_cube(
                Path(export_lut) / rel.with_suffix(".cube"), lut,
                title=f"studio-align {creator} {src.name}", comment=describe_grade(params),
            )  # fmt: skip
        pixels += rgb.width * rgb.height
        bar.update(i + 1)
    bar.close()
    seconds = time.perf_counter() - t0
    stats.update(
        images=len(files) - len(skipped),
        skipped=skipped,
        megapixels=pixels / 1e6,
        seconds=seconds,
        megapixels_per_s=pixels / 1e6 / seconds if seconds > 0 and pixels else 0.0,
    )
    return stats
