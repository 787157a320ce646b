"""The `clip` encoder: real open_clip code on a tiny random architecture."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("open_clip")

from studio_align.errors import ModelLoadError
from studio_align.reward_models.clip import TINY_CONFIG, ClipEncoder
from studio_align.simulate.grading.scenes import make_scenes

pytestmark = pytest.mark.clip


@pytest.fixture(scope="module")
def tiny() -> ClipEncoder:
    return ClipEncoder("studio-tiny-clip", model_config=TINY_CONFIG, random_init=True, seed=3)


def test_embeddings_are_normalised(tiny):
    imgs = list(make_scenes(0, 3, (40, 56)))
    v = tiny.encode_images(imgs)
    t = tiny.encode_texts(["warm film look", "cool moody street"])
    assert v.shape == (3, tiny.dim) and t.shape == (2, tiny.dim)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(v[0], v[1])
    assert tiny.identity.startswith("clip:studio-tiny-clip:") and "random-seed=3" in tiny.identity


def test_weights_round_trip_through_the_weights_path(tiny, tmp_path):
    imgs = list(make_scenes(1, 2, (32, 32)))
    path = tiny.save_weights(tmp_path / "open_clip_pytorch_model.bin")
    # a different random seed, then the saved weights: identical embeddings
    loaded = ClipEncoder("studio-tiny-clip", str(path), model_config=TINY_CONFIG, seed=99)
    np.testing.assert_allclose(loaded.encode_images(imgs), tiny.encode_images(imgs), atol=1e-6)
    # a directory holding the file works too, and the identity names the weights digest
    from_dir = ClipEncoder("studio-tiny-clip", str(tmp_path), model_config=TINY_CONFIG)
    assert from_dir.identity == loaded.identity and "sha256=" in loaded.identity
    assert loaded.identity != tiny.identity


def test_without_weights_the_error_says_how_to_provide_them():
    with pytest.raises(ModelLoadError, match=r"never downloads weights.*weights = .*random_init"):
        ClipEncoder("ViT-B-32")


def test_bad_weights_and_unknown_models(tmp_path):
    with pytest.raises(ModelLoadError, match="not found"):
        ClipEncoder("studio-tiny-clip", str(tmp_path / "missing.bin"), model_config=TINY_CONFIG)
    (tmp_path / "junk.bin").write_bytes(b"\0" * 10)
    with pytest.raises(ModelLoadError, match=r"junk\.bin: cannot load weights"):
        ClipEncoder("studio-tiny-clip", str(tmp_path / "junk.bin"), model_config=TINY_CONFIG)
    with pytest.raises(ModelLoadError, match="unknown open_clip model"):
        ClipEncoder("no-such-model", random_init=True)
