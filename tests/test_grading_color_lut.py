"""CIEDE2000 against published data, and `.cube` LUTs against an independent interpolator."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from PIL import Image

from studio_align.errors import DataError
from studio_align.simulate.grading.scenes import make_scenes
from studio_align.verticals.grading.color import delta_e2000, mean_delta_e
from studio_align.verticals.grading.lut import apply_lut, grade_lut, read_cube, write_cube
from studio_align.verticals.grading.renderer import N_PARAMS, render

# Sharma, Wu, Dalal (2005), supplementary test data: (Lab1, Lab2, ΔE00)
SHARMA = [
    ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
    ((50.0, 3.1571, -77.2803), (50.0, 0.0, -82.7485), 2.8615),
    ((50.0, 2.8361, -74.0200), (50.0, 0.0, -82.7485), 3.4412),
    ((50.0, 0.0, 0.0), (50.0, -1.0, 2.0), 2.3669),
    ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
    ((50.0, 2.5, 0.0), (61.0, -5.0, 29.0), 22.8977),
    ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
    ((50.0, 2.5, 0.0), (50.0, 0.0, -2.5), 4.3065),
]


def test_delta_e2000_matches_published_pairs():
    a = np.array([p[0] for p in SHARMA])
    b = np.array([p[1] for p in SHARMA])
    want = np.array([p[2] for p in SHARMA])
    np.testing.assert_allclose(delta_e2000(a, b), want, atol=1e-4)
    np.testing.assert_allclose(delta_e2000(b, a), want, atol=1e-4)  # symmetric
    assert float(delta_e2000(a[0], a[0])) == 0.0


def trilinear(lut: np.ndarray, rgb: np.ndarray) -> np.ndarray:
    """Independent trilinear interpolation: `lut` [N, N, N, 3] indexed [b, g, r]."""
    n = lut.shape[0]
    x = np.clip(rgb, 0, 1) * (n - 1)
    i0 = np.minimum(np.floor(x).astype(int), n - 2)
    f = x - i0
    r0, g0, b0 = i0[..., 0], i0[..., 1], i0[..., 2]
    fr, fg, fb = f[..., 0:1], f[..., 1:2], f[..., 2:3]
    out = np.zeros(rgb.shape, np.float64)
    for db, wb in ((0, 1 - fb), (1, fb)):
        for dg, wg in ((0, 1 - fg), (1, fg)):
            for dr, wr in ((0, 1 - fr), (1, fr)):
                out += wb * wg * wr * lut[b0 + db, g0 + dg, r0 + dr]
    return out


@pytest.fixture(scope="module")
def photos() -> np.ndarray:
    """20 held-out photos (seed never used in training), as 8-bit files would hold them."""
    imgs = make_scenes(1234, 20, (96, 96))
    return np.round(imgs * 255) / 255


def test_cube_roundtrip_and_independent_trilinear_match_the_renderer(tmp_path, photos):
    rng = np.random.default_rng(0)
    for k in range(4):
        params = np.clip(rng.normal(0, 0.5, N_PARAMS), -1, 1).astype(np.float32)
        path = write_cube(tmp_path / f"g{k}.cube", grade_lut(params, 33), comment="test")
        lut = read_cube(path)
        assert lut.shape == (33, 33, 33, 3)
        de = mean_delta_e(trilinear(lut, photos), render(photos, params))
        assert de.mean() <= 1.0, de
        # Pillow's C filter (the `grade` fast path) agrees with the numpy interpolation
        im = Image.fromarray((photos[0] * 255 + 0.5).astype(np.uint8))
        fast = np.asarray(apply_lut(im, grade_lut(params, 33)), np.float64) / 255
        assert float(mean_delta_e(fast, trilinear(lut, photos[0]))) < 0.5


def test_lut_identity_grade_is_identity():
    lut = grade_lut(np.zeros(N_PARAMS, np.float32), 17).reshape(17, 17, 17, 3)
    g = np.linspace(0, 1, 17)
    np.testing.assert_allclose(lut[3, 5, 7], [g[7], g[5], g[3]], atol=1e-6)


def test_bad_cube_and_size_are_data_errors(tmp_path):
    p = tmp_path / "bad.cube"
    p.write_text("LUT_3D_SIZE 2\n0 0 0\n1 1 1\n")
    with pytest.raises(DataError, match="N\\^3 rows"):
        read_cube(p)
    with pytest.raises(DataError, match="outside"):
        grade_lut(np.zeros(N_PARAMS), 200)


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg not installed")
def test_ffmpeg_lut3d_matches_the_renderer(tmp_path, photos):
    params = np.array([0.3, 0.4, 0.2, -0.2, 0.5, -0.1, 0.3, -0.2, 0.2], np.float32)
    cube = write_cube(tmp_path / "grade.cube", grade_lut(params, 33))
    des = []
    for i in range(0, 20, 4):
        src = tmp_path / f"in{i}.png"
        Image.fromarray((photos[i] * 255 + 0.5).astype(np.uint8)).save(src)
        dst = tmp_path / f"out{i}.png"
        subprocess.run(
            ["ffmpeg", "-loglevel", "error", "-y", "-i", str(src), "-vf",
             f"lut3d=file={cube}:interp=trilinear", "-pix_fmt", "rgb24", str(dst)],
            check=True,
        )  # fmt: skip
        out = np.asarray(Image.open(dst).convert("RGB"), np.float64) / 255
        des.append(float(mean_delta_e(out, render(photos[i], params))))
    assert np.mean(des) <= 1.0, des
