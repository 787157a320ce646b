"""The embedding cache: each image content is embedded once per encoder identity."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from PIL import Image

from studio_align.errors import DataError
from studio_align.reward_models.cache import CachedEncoder, EmbeddingCache
from studio_align.reward_models.color_stats import ColorStatsEncoder


class Counting:
    """A real encoder wrapped to count how many images reach it."""

    def __init__(self, inner):
        self.inner, self.calls = inner, 0
        self.identity, self.dim = inner.identity, inner.dim

    def encode_images(self, images):
        self.calls += len(images)
        return self.inner.encode_images(images)


def _write(tmp_path, n):
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        p = tmp_path / f"im{i}.png"
        Image.fromarray(rng.integers(0, 255, (16, 16, 3), np.uint8)).save(p)
        paths.append(p)
    return paths


def test_an_image_is_embedded_once(tmp_path):
    paths = _write(tmp_path, 4)
    enc = Counting(ColorStatsEncoder(size=16))
    cached = CachedEncoder(enc, tmp_path / "cache")
    first = cached.encode_files([*paths, paths[0]])  # duplicate within one call
    assert enc.calls == 4
    again = CachedEncoder(enc, tmp_path / "cache").encode_files(paths)  # fresh wrapper, same dir
    assert enc.calls == 4
    np.testing.assert_array_equal(first[:4], again)
    # a renamed copy has the same bytes: a hit
    shutil.copy(paths[1], tmp_path / "renamed.png")
    cached.encode_files([tmp_path / "renamed.png"])
    assert enc.calls == 4 and cached.stats.hits >= 1


def test_content_or_encoder_change_misses(tmp_path):
    paths = _write(tmp_path, 2)
    enc = Counting(ColorStatsEncoder(size=16))
    cached = CachedEncoder(enc, tmp_path / "cache")
    cached.encode_files(paths)
    arr = np.asarray(Image.open(paths[0])).copy()
    arr[0, 0] ^= 1
    Image.fromarray(arr).save(paths[0])
    cached.encode_files(paths)
    assert enc.calls == 3  # only the edited file again
    other = Counting(ColorStatsEncoder(size=24))
    CachedEncoder(other, tmp_path / "cache").encode_files(paths)
    assert other.calls == 2  # another identity never reads the first one's entries


def test_in_memory_images_and_bad_files(tmp_path):
    enc = Counting(ColorStatsEncoder(size=16))
    cached = CachedEncoder(enc, EmbeddingCache(tmp_path / "c"))
    ims = [np.random.default_rng(i).random((8, 8, 3)).astype(np.float32) for i in range(3)]
    cached.encode_images(ims)
    cached.encode_images(ims)
    assert enc.calls == 3
    good = _write(tmp_path, 1)[0]
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"junk")
    with pytest.raises(DataError, match=r"bad\.png"):
        cached.encode_files([good, bad])
    vecs, errors = cached.encode_files_lenient([good, bad, tmp_path / "gone.png"])
    assert set(errors) == {str(bad), str(tmp_path / "gone.png")}
    assert np.abs(vecs[0]).sum() > 0 and not vecs[1].any()
