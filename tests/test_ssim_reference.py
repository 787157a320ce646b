"""The identity reward's SSIM agrees with scikit-image's reference implementation."""

from __future__ import annotations

import numpy as np
import pytest

from studio_align.reward_models.ssim import ssim_batch

metrics = pytest.importorskip("skimage.metrics", reason="scikit-image (dev extra) not installed")


@pytest.mark.parametrize("noise", [0.0, 0.02, 0.1, 0.4])
def test_ssim_matches_scikit_image(noise: float) -> None:
    rng = np.random.default_rng(int(noise * 100))
    a = rng.random((2, 40, 33))
    b = np.clip(a + rng.normal(0, noise, a.shape), 0, 1)
    ours = ssim_batch(a, b, window=7)
    ref = [
        metrics.structural_similarity(
            a[i],
            b[i],
            win_size=7,
            data_range=1.0,
            gaussian_weights=False,
            use_sample_covariance=False,
        )
        for i in range(2)
    ]
    np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-7)
