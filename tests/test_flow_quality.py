"""Sample-quality figures: each responds to the defect it names and reads 1.0 on real data."""

from __future__ import annotations

import numpy as np
import pytest

from studio_align.verticals.flow.data import ALL_TAG_SETS, real_by_tag_set
from studio_align.verticals.flow.quality import (
    fit_tag_classifier,
    highfreq_energy,
    sample_quality,
    seam_index,
)


@pytest.fixture(scope="module")
def real() -> dict[str, np.ndarray]:
    return {
        "fit": real_by_tag_set(ALL_TAG_SETS, 40, seed=7, size=16),
        "fresh": real_by_tag_set(ALL_TAG_SETS, 12, seed=8, size=16),
    }


def test_seam_index_sees_a_patch_grid_and_not_its_absence():
    rng = np.random.default_rng(0)
    smooth = np.cumsum(rng.normal(0, 0.02, (8, 32, 32, 3)), axis=2) % 1.0
    tiles = np.kron(rng.uniform(size=(8, 4, 4, 3)), np.ones((1, 8, 8, 1)))  # flat 8x8 tiles
    assert seam_index(tiles + 0.01 * rng.normal(size=tiles.shape), 8) > 5.0
    assert 0.8 < seam_index(smooth, 8) < 1.25
    with pytest.raises(ValueError, match="no boundary"):
        seam_index(smooth, 64)


def test_highfreq_energy_rises_with_noise():
    rng = np.random.default_rng(1)
    clean = real_by_tag_set(ALL_TAG_SETS[:2], 4, seed=3).reshape(-1, 32, 32, 3)
    noisy = np.clip(clean + rng.normal(0, 0.05, clean.shape), 0, 1)
    assert highfreq_energy(noisy) > 1.5 * highfreq_energy(clean)


def test_real_against_real_reads_one_and_noise_is_not_recognised(real):
    clf = fit_tag_classifier(real["fit"])
    q = sample_quality(real["fresh"], real["fresh"], clf, patch=4)
    assert q["seam_ratio"] == pytest.approx(1.0) and q["recognisability"] == pytest.approx(1.0)
    assert q["tag_accuracy/real"] > 0.6  # ten tag sets: chance is 0.1
    rng = np.random.default_rng(2)
    noise = rng.uniform(size=real["fresh"].shape).astype(np.float32)
    qn = sample_quality(noise, real["fresh"], clf, patch=4)
    assert qn["noise_ratio"] > 3 and qn["recognisability"] < 0.5
    # other real draws of the same tag sets: near 1 on every figure
    other = real_by_tag_set(ALL_TAG_SETS, 12, seed=9, size=16)
    qo = sample_quality(other, real["fresh"], clf, patch=4)
    assert 0.85 < qo["seam_ratio"] < 1.15 and 0.8 < qo["noise_ratio"] < 1.25


def test_a_grid_as_large_as_the_image_has_no_seam_ratio(real):
    """16x16 images on a 16-pixel grid (a model whose patch is the whole frame) have no
    boundary to draw: the ratio is None, and every other figure is still measured."""
    clf = fit_tag_classifier(real["fit"])
    q = sample_quality(real["fresh"], real["fresh"], clf, patch=16)
    assert q["seam_ratio"] is None and q["recognisability"] == pytest.approx(1.0)
