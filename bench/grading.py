"""Grading vertical figures: LUT fidelity and `grade` throughput; prints one JSON object.

- `lut`: for 20 held-out photos (procedural scenes from a seed no run trains on), each
  graded by the checkpoint's model for a creator, the `.cube` that `grade --export-lut`
  writes is applied (a) by an independent numpy trilinear interpolation and (b) by
  `ffmpeg -vf lut3d` when ffmpeg is installed; mean ΔE2000 to the exact renderer.
- `throughput`: `studio-align grade` run as a subprocess on `--images` JPEGs of
  `--megapixels` each (written first, not timed); megapixels per second as the command
  reports it (decode + thumbnail + predict + LUT + encode on all cores, model load and
  compilation excluded), the seconds of each phase summed over the worker threads, and
  the command's whole wall time.

Usage: `python bench/grading.py --checkpoint RUN/model --creator ana [--images 8 --megapixels 12]`
Timings depend on machine load: the JSON records `os.getloadavg()` before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from studio_align.simulate.grading.scenes import make_scenes
from studio_align.verticals.grading.color import mean_delta_e
from studio_align.verticals.grading.lut import grade_lut, read_cube, write_cube
from studio_align.verticals.grading.model import GradingModel
from studio_align.verticals.grading.renderer import render


def trilinear(lut: np.ndarray, rgb: np.ndarray) -> np.ndarray:
    n = lut.shape[0]
    x = np.clip(rgb, 0, 1) * (n - 1)
    i0 = np.minimum(np.floor(x).astype(int), n - 2)
    f = x - i0
    out = np.zeros(rgb.shape, np.float64)
    for db in (0, 1):
        for dg in (0, 1):
            for dr in (0, 1):
                w = (
                    (f[..., 2:3] if db else 1 - f[..., 2:3])
                    * (f[..., 1:2] if dg else 1 - f[..., 1:2])
                    * (f[..., 0:1] if dr else 1 - f[..., 0:1])
                )
                out += w * lut[i0[..., 2] + db, i0[..., 1] + dg, i0[..., 0] + dr]
    return out


def lut_fidelity(checkpoint: str, creator: str, size: int, tmp: Path) -> dict[str, object]:
    model = GradingModel.load(checkpoint)
    photos = np.round(make_scenes(4242, 20, (256, 256)) * 255) / 255
    thumbs = np.stack(
        [np.asarray(Image.fromarray((p * 255 + 0.5).astype(np.uint8)).resize(
            (model.thumbnail, model.thumbnail), Image.Resampling.BILINEAR), np.float32) / 255
         for p in photos]
    )  # fmt: skip
    grades = model.predict(thumbs, ["warm film look"] * 20, [creator] * 20)
    np_de, ff_de = [], []
    for i, (photo, g) in enumerate(zip(photos, grades, strict=True)):
        cube = write_cube(tmp / f"p{i}.cube", grade_lut(g, size))
        exact = render(photo, g)
        np_de.append(float(mean_delta_e(trilinear(read_cube(cube), photo), exact)))
        if shutil.which("ffmpeg"):
            src, dst = tmp / f"p{i}.png", tmp / f"p{i}_ff.png"
            Image.fromarray((photo * 255 + 0.5).astype(np.uint8)).save(src)
            subprocess.run(
                ["ffmpeg", "-loglevel", "error", "-y", "-i", str(src), "-vf",
                 f"lut3d=file={cube}:interp=trilinear", "-pix_fmt", "rgb24", str(dst)],
                check=True,
            )  # fmt: skip
            out = np.asarray(Image.open(dst).convert("RGB"), np.float64) / 255
            ff_de.append(float(mean_delta_e(out, exact)))
    return {
        "photos": 20,
        "lut_size": size,
        "mean_grade_abs": float(np.abs(grades).mean()),
        "numpy_trilinear_mean_delta_e2000": float(np.mean(np_de)),
        "numpy_trilinear_max_photo_delta_e2000": float(np.max(np_de)),
        "ffmpeg_lut3d_mean_delta_e2000": float(np.mean(ff_de)) if ff_de else None,
    }


def throughput(checkpoint: str, creator: str, n: int, mp: float, tmp: Path) -> dict[str, object]:
    side = int((mp * 1e6) ** 0.5)
    src = tmp / "big"
    src.mkdir()
    base = make_scenes(7, 1, (256, 256))[0]
    for i in range(n):
        img = Image.fromarray((base * 255).astype(np.uint8)).resize((side, side))
        img.save(src / f"img{i}.jpg", quality=90)
    cmd = [sys.executable, "-m", "studio_align.cli", "grade", "--checkpoint", checkpoint,
           "--creator", creator, str(src), "--out", str(tmp / "out"), "--json"]  # fmt: skip
    t = time.perf_counter()
    res = subprocess.run(cmd, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t
    st = json.loads(res.stdout)
    return {
        "command": " ".join(cmd[1:]),
        "images": st["images"],
        "megapixels": st["megapixels"],
        "megapixels_per_s": st["megapixels_per_s"],
        "workers": st.get("workers"),
        # summed over workers: decode, grade (thumbnail + predict + 3D LUT), encode
        "phase_seconds": st.get("phase_seconds"),
        "grade_only_megapixels_per_worker_s": st.get("grade_megapixels_per_worker_s"),
        "command_wall_s": wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--creator", required=True)
    ap.add_argument("--lut-size", type=int, default=33)
    ap.add_argument("--images", type=int, default=8)
    ap.add_argument("--megapixels", type=float, default=12.0)
    args = ap.parse_args()
    out: dict[str, object] = {"load_before": os.getloadavg(), "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as d:
        out["lut"] = lut_fidelity(args.checkpoint, args.creator, args.lut_size, Path(d))
    with tempfile.TemporaryDirectory() as d:
        out["throughput"] = throughput(
            args.checkpoint, args.creator, args.images, args.megapixels, Path(d)
        )
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
