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
- Speed: images are graded side by side on `workers` threads (default: one per core);
  Pillow's JPEG/PNG decode, `Color3DLUT` and encode run in C without the GIL, the model
  (a few-microsecond MLP on a thumbnail) runs one call at a time under a lock. An RGB
  input is graded in place of the decoded image (no full-size copy) and the thumbnail is
  made by one reducing resize. The stats separate decode, grade (thumbnail + predict +
  LUT) and encode seconds, summed over workers.
- Unreadable inputs are skipped, counted and listed with the reason; the others are
  still graded.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from studio_align.errors import DataError
from studio_align.reward_models.images import downscale, to_rgb
from studio_align.training.metrics import Progress
from studio_align.verticals.grading.dataset import default_workers
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


def check_outputs(files: Sequence[tuple[Path, Path]], out_dir: Path) -> None:
    """Refuse, before any image is written, an output that would replace an input or
    another output (`--out` set to an input folder; two inputs of the same name)."""
    inputs = {src.resolve(): src for src, _ in files}
    written: dict[Path, Path] = {}
    for src, rel in files:
        target = (out_dir / rel).resolve()
        if target in inputs:
            raise DataError(
                f"{inputs[target]}: --out {out_dir} would write over this input; "
                "choose an output folder that holds no input"
            )
        if target in written:
            raise DataError(
                f"{src} and {written[target]} would both be written to {out_dir / rel}; "
                "grade them into separate folders"
            )
        written[target] = src


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
    """(RGB, alpha or None) of a loaded image; an RGB input is returned as is (no copy)."""
    if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
        rgba = im.convert("RGBA")
        return rgba.convert("RGB"), rgba.getchannel("A")
    return (im if im.mode == "RGB" else to_rgb(im)), None


def _thumb(rgb: Image.Image, size: int) -> np.ndarray:
    """The model's thumbnail as `dataset.load_thumbs` makes it for training: the long side
    reduced to at most `4 * size` (no full-size copy), then squashed to `size` square."""
    return thumbnails([downscale(rgb, 4 * size)], size)[0]


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
    workers: int | None = None,
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
    if files:
        assert out_dir is not None
        check_outputs(files, Path(out_dir))
    lock = threading.Lock()  # the model and the exact renderer run one call at a time

    def one(item: tuple[Path, Path]) -> tuple[int, dict[str, float]] | str:
        src, rel = item
        clock = {"decode": 0.0, "grade": 0.0, "encode": 0.0}
        t = time.perf_counter()
        try:
            with Image.open(src) as im:
                im.load()
                fmt, info = im.format, {str(k): v for k, v in im.info.items()}
                rgb, alpha = _split_alpha(im)
                clock["decode"] = time.perf_counter() - t
                t = time.perf_counter()
                thumb = _thumb(rgb, model.thumbnail)
                with lock:
                    params = model.predict(thumb[None], [style], [creator])[0]
                table = grade_lut(params, APPLY_LUT_SIZE)
                if exact:
                    with lock:
                        arr = render(np.asarray(rgb, np.float32) / 255.0, params, backend="jax")
                    graded = Image.fromarray((np.clip(arr, 0, 1) * 255 + 0.5).astype(np.uint8))
                else:
                    graded = apply_lut(rgb, table)
                if alpha is not None:
                    graded = Image.merge("RGBA", (*graded.split(), alpha))
                n_pixels = rgb.width * rgb.height
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombError, DataError) as e:
            return f"cannot decode image ({type(e).__name__}: {e})"
        clock["grade"] = time.perf_counter() - t
        t = time.perf_counter()
        assert out_dir is not None
        _save(graded, Path(out_dir) / rel, fmt, info)
        if export_lut is not None:
            lut = table if lut_size == APPLY_LUT_SIZE else grade_lut(params, lut_size)
            write_cube(
                Path(export_lut) / rel.with_suffix(".cube"), lut,
                title=f"studio-align {creator} {src.name}", comment=describe_grade(params),
            )  # fmt: skip
        clock["encode"] = time.perf_counter() - t
        return n_pixels, clock

    if files:  # compile the model's call before the clock starts (part of loading it)
        model.predict(neutral_reference(model.thumbnail)[None], [style], [creator])
    skipped: dict[str, str] = {}
    phases = {"decode": 0.0, "grade": 0.0, "encode": 0.0}
    pixels, t0 = 0, time.perf_counter()
    bar = Progress(len(files), stage="grade", enabled=progress)
    n_workers = max(1, min(workers or default_workers(), len(files) or 1))
    with ThreadPoolExecutor(n_workers) as pool:
        for i, ((src, _), res) in enumerate(zip(files, pool.map(one, files), strict=True)):
            if isinstance(res, str):
                skipped[str(src)] = res
            else:
                pixels += res[0]
                for k, v in res[1].items():
                    phases[k] += v
            bar.update(i + 1)
    bar.close()
    seconds = time.perf_counter() - t0
    stats.update(
        images=len(files) - len(skipped),
        skipped=skipped,
        megapixels=pixels / 1e6,
        seconds=seconds,
        megapixels_per_s=pixels / 1e6 / seconds if seconds > 0 and pixels else 0.0,
        workers=n_workers,
        phase_seconds=phases,
        grade_megapixels_per_worker_s=pixels / 1e6 / phases["grade"] if phases["grade"] else 0.0,
    )
    return stats
