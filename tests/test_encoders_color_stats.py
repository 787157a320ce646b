"""The colour-statistics encoder measures what its names say."""

from __future__ import annotations

import numpy as np

from studio_align.reward_models.color_stats import (
    FEATURE_DIM,
    SCALAR_NAMES,
    ColorStatsEncoder,
    color_statistics,
    srgb_to_lab,
)
from studio_align.simulate.grading.scenes import make_scenes
from studio_align.verticals.grading.renderer import params_to_vector, render


def test_lab_reference_values():
    lab = srgb_to_lab(np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]], np.float32))
    np.testing.assert_allclose(lab[0], [100, 0, 0], atol=0.5)
    np.testing.assert_allclose(lab[1], [0, 0, 0], atol=0.5)
    np.testing.assert_allclose(lab[2], [53.2, 80.1, 67.2], atol=1.0)


def test_statistics_follow_edits():
    src = make_scenes(0, 6, (48, 48))
    base = color_statistics(src)
    warm = color_statistics(render(src, params_to_vector({"temperature": 0.8})))
    bright = color_statistics(render(src, params_to_vector({"exposure": 0.6})))
    punchy = color_statistics(render(src, params_to_vector({"contrast": 0.8})))
    flat = color_statistics(render(src, params_to_vector({"saturation": -1.0})))
    assert (warm["warmth"] > base["warmth"]).all()
    assert (bright["brightness"] > base["brightness"]).all()
    assert (punchy["contrast"] > base["contrast"]).all()
    assert (flat["saturation"] < base["saturation"] * 0.6).all()


def test_encoder_shape_identity_and_determinism():
    enc = ColorStatsEncoder(size=32)
    imgs = list(make_scenes(1, 3, (40, 50)))
    a, b = enc.encode_images(imgs), enc.encode_images(imgs)
    assert a.shape == (3, FEATURE_DIM) and a.dtype == np.float32
    np.testing.assert_array_equal(a, b)
    assert enc.dim == FEATURE_DIM == len(SCALAR_NAMES) + 32
    assert enc.identity != ColorStatsEncoder(size=64).identity
    assert enc.encode_images([]).shape == (0, FEATURE_DIM)
