"""Robust image loading: every bad or unusual input is handled or named in a DataError."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from studio_align.errors import DataError
from studio_align.reward_models.color_stats import ColorStatsEncoder
from studio_align.reward_models.images import as_float_array, load_image


def test_missing_file_is_named(tmp_path):
    with pytest.raises(DataError, match=r"nope\.png: image file not found"):
        load_image(tmp_path / "nope.png")


def test_corrupt_and_truncated_files_are_named(tmp_path):
    bad = tmp_path / "garbage.png"
    bad.write_bytes(b"not an image at all")
    with pytest.raises(DataError, match=r"garbage\.png: cannot decode image"):
        load_image(bad)
    good = tmp_path / "ok.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), np.uint8)).save(good)
    cut = tmp_path / "truncated.png"
    cut.write_bytes(good.read_bytes()[:200])
    with pytest.raises(DataError, match=r"truncated\.png"):
        load_image(cut)


def test_rgba_is_composited_over_grey(tmp_path):
    arr = np.zeros((8, 8, 4), np.uint8)
    arr[..., 0] = 255  # red, fully transparent
    p = tmp_path / "alpha.png"
    Image.fromarray(arr, "RGBA").save(p)
    im = load_image(p)
    assert im.mode == "RGB"
    assert np.asarray(im)[0, 0].tolist() == [128, 128, 128]


def test_greyscale_and_16bit(tmp_path):
    g = tmp_path / "grey.png"
    Image.fromarray(np.full((10, 12), 200, np.uint8), "L").save(g)
    im = load_image(g)
    assert im.mode == "RGB" and im.size == (12, 10)
    assert np.asarray(im)[0, 0].tolist() == [200, 200, 200]

    p16 = tmp_path / "deep.png"
    Image.fromarray(np.full((10, 10), 16384, np.uint16)).save(p16)  # 0.25 of full scale
    im16 = load_image(p16)
    v = np.asarray(im16)[0, 0]
    assert im16.mode == "RGB" and abs(int(v[0]) - 64) <= 1  # rescaled by 65535, not by max


def test_huge_image_is_downscaled(tmp_path):
    p = tmp_path / "huge.png"
    Image.new("RGB", (6000, 3000), (10, 20, 30)).save(p)
    im = load_image(p, max_side=512)
    assert im.size == (512, 256)
    p2 = tmp_path / "huge.jpg"
    Image.new("RGB", (5000, 2500), (200, 100, 50)).save(p2, quality=80)
    assert max(load_image(p2, max_side=300).size) == 300


def test_pixel_limit_refuses_bombs(tmp_path):
    p = tmp_path / "wide.png"
    Image.new("L", (3000, 2000)).save(p)
    with pytest.raises(DataError, match=r"wide\.png: image is 3000x2000"):
        load_image(p, max_pixels=1_000_000)


def test_every_mode_encodes(tmp_path):
    enc = ColorStatsEncoder(size=16)
    images = [
        Image.new("RGB", (20, 30), (1, 2, 3)),
        Image.new("RGBA", (20, 30)),
        Image.new("L", (5, 5)),
        Image.new("P", (9, 9)),
        Image.new("CMYK", (9, 9)),
        np.random.default_rng(0).random((7, 9, 3)),
        np.zeros((7, 9), np.float32),
    ]
    out = enc.encode_images(images)
    assert out.shape == (len(images), enc.dim) and np.isfinite(out).all()
    assert as_float_array(np.zeros((4, 4, 3), np.uint8)).dtype == np.float32


def test_decoding_stays_within_a_memory_budget(tmp_path) -> None:
    from PIL import Image

    from studio_align.errors import DataError
    from studio_align.reward_models.images import DEFAULT_MAX_DECODE_BYTES, decode_bytes, load_image

    # the 20000 x 20000 zeros PNG: within 4e8 pixels, ~1.6 GB to decode: over the default
    assert decode_bytes("L", 20000, 20000) > DEFAULT_MAX_DECODE_BYTES
    assert decode_bytes("RGBA", 10, 10) > decode_bytes("RGB", 10, 10)  # per channel
    big = tmp_path / "zeros.png"
    Image.new("L", (3000, 3000)).save(big)
    with pytest.raises(DataError, match=r"zeros\.png: image is 3000x3000 L, .* MiB budget"):
        load_image(big, max_decode_bytes=8 << 20)
    assert load_image(big, max_decode_bytes=64 << 20).size == (1024, 1024)
    jpg = tmp_path / "big.jpg"
    Image.new("RGB", (4000, 4000), (200, 10, 10)).save(jpg, quality=80)
    # draft mode decodes at 1/2 scale (24 MB): within a budget the full size (96 MB) breaks
    assert load_image(jpg, max_decode_bytes=30 << 20).size == (1024, 1024)
