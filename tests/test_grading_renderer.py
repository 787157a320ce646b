"""The grading renderer: identity at zero, each parameter moves the statistic it names."""

from __future__ import annotations

import numpy as np
import pytest

from studio_align.reward_models.color_stats import color_statistics
from studio_align.simulate.grading.scenes import SCENE_KINDS, make_scene, make_scenes
from studio_align.verticals.grading.renderer import (
    N_PARAMS,
    PARAM_NAMES,
    params_to_vector,
    render,
    vector_to_params,
)


@pytest.fixture(scope="module")
def src():
    return make_scenes(0, 12, (40, 40))


def test_zero_is_identity_and_output_in_range(src):
    np.testing.assert_allclose(render(src, np.zeros(N_PARAMS)), src, atol=1e-5)
    wild = render(src, np.random.default_rng(0).normal(0, 3, (len(src), N_PARAMS)))
    assert wild.min() >= 0 and wild.max() <= 1 and np.isfinite(wild).all()


def test_batch_equals_one_by_one(src):
    p = np.random.default_rng(1).uniform(-1, 1, (len(src), N_PARAMS)).astype(np.float32)
    batch = render(src, p)
    for i in (0, 5, 11):
        np.testing.assert_allclose(batch[i], render(src[i], p[i]), atol=1e-6)


@pytest.mark.parametrize(
    ("param", "stat", "sign"),
    [
        ("exposure", "brightness", +1),
        ("contrast", "contrast", +1),
        ("saturation", "saturation", +1),
        ("vibrance", "saturation", +1),
        ("temperature", "warmth", +1),
        ("tint", "tint", -1),
        ("shadows", "shadows", +1),
        ("highlights", "highlights", +1),
        ("fade", "shadows", +1),
    ],
)
def test_each_parameter_moves_its_statistic(src, param, stat, sign):
    lo = color_statistics(render(src, params_to_vector({param: -0.5})))[stat]
    hi = color_statistics(render(src, params_to_vector({param: 0.5})))[stat]
    assert np.mean(sign * (hi - lo) > 0) >= 0.9, (param, stat)


def test_params_round_trip_and_errors(src):
    d = {"exposure": 0.25, "fade": -0.5}
    v = params_to_vector(d)
    assert v.shape == (N_PARAMS,) and vector_to_params(v)["exposure"] == 0.25
    assert set(vector_to_params(v)) == set(PARAM_NAMES)
    with pytest.raises(KeyError, match="unknown grading parameter"):
        params_to_vector({"glow": 1.0})
    with pytest.raises(ValueError, match="does not match"):
        render(src, np.zeros((3, N_PARAMS)))


def test_scenes_are_varied_and_valid():
    rng = np.random.default_rng(0)
    imgs = [make_scene(rng, (32, 48), k) for k in SCENE_KINDS]
    for im in imgs:
        assert im.shape == (32, 48, 3) and im.dtype == np.float32
        assert im.min() >= 0 and im.max() <= 1 and im.std() > 0.01
    means = np.array([im.mean((0, 1)) for im in imgs])
    assert np.linalg.norm(means - means.mean(0), axis=1).min() > 0.01
    np.testing.assert_array_equal(make_scenes(3, 4), make_scenes(3, 4))


def test_numpy_and_jax_backends_agree(src):
    p = np.random.default_rng(2).uniform(-1.5, 1.5, (len(src), N_PARAMS))
    np.testing.assert_allclose(
        render(src, p, backend="numpy"), render(src, p, backend="jax"), atol=1e-5
    )
    with pytest.raises(ValueError, match="unknown render backend"):
        render(src, p, backend="torch")
