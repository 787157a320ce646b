"""Flow losses: Diffusion-DPO on a hand-computed example, rectified flow, step densities."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest

from studio_align.algorithms.flow import (
    diffusion_dpo_loss,
    gaussian_logpdf,
    interpolate,
    rectified_flow_loss,
    sde_mean,
    sde_std,
    step_logprob,
    velocity_anchor,
)


def test_diffusion_dpo_hand_computed():
    # pair 1: policy diff (0.10 - 0.20) = -0.10, reference diff (0.12 - 0.18) = -0.06
    #   -> inside = -0.5 * 10 * (-0.10 + 0.06) = 0.2
    # pair 2: policy diff (0.30 - 0.25) = 0.05, reference diff (0.28 - 0.26) = 0.02
    #   -> inside = -0.5 * 10 * (0.05 - 0.02) = -0.15
    # loss = mean(log(1 + e^-0.2), log(1 + e^0.15)) = mean(0.598139, 0.770957)
    loss, m = diffusion_dpo_loss(
        jnp.array([0.10, 0.30]), jnp.array([0.20, 0.25]),
        jnp.array([0.12, 0.28]), jnp.array([0.18, 0.26]), beta=10.0,
    )  # fmt: skip
    assert float(loss) == pytest.approx(0.6845479586, abs=1e-6)
    assert float(m["accuracy"]) == pytest.approx(0.5)
    assert float(m["margin"]) == pytest.approx((0.2 - 0.15) / 2, abs=1e-6)


def test_diffusion_dpo_is_log2_at_the_reference():
    e = jnp.array([0.3, 0.1, 0.7])
    loss, _ = diffusion_dpo_loss(e, e[::-1], e, e[::-1], beta=5000.0)
    assert float(loss) == pytest.approx(math.log(2.0), rel=1e-6)


def test_velocity_anchor_is_the_per_sample_pixel_mean_of_the_squared_difference():
    v = jnp.array([[[1.0, 2.0], [3.0, 4.0]], [[0.0, 0.0], [0.0, 0.0]]])
    ref = jnp.array([[[1.0, 0.0], [3.0, 2.0]], [[0.0, 0.0], [0.0, 0.0]]])
    np.testing.assert_allclose(np.asarray(velocity_anchor(v, ref)), [2.0, 0.0])  # (4 + 4) / 4


def test_rectified_flow_loss_zero_at_the_true_velocity():
    rng = np.random.default_rng(0)
    x0, noise = rng.normal(size=(2, 2, 4, 4, 3)).astype(np.float32)
    loss, _ = rectified_flow_loss(jnp.asarray(noise - x0), jnp.asarray(x0), jnp.asarray(noise))
    assert float(loss) == pytest.approx(0.0, abs=1e-12)
    loss2, _ = rectified_flow_loss(jnp.zeros_like(x0), jnp.asarray(x0), jnp.asarray(noise))
    assert float(loss2) == pytest.approx(float(np.mean((noise - x0) ** 2)), rel=1e-5)
    xt = interpolate(jnp.asarray(x0), jnp.asarray(noise), jnp.array([0.0, 1.0]))
    np.testing.assert_allclose(np.asarray(xt[0]), x0[0], atol=1e-6)
    np.testing.assert_allclose(np.asarray(xt[1]), noise[1], atol=1e-6)


def test_step_logprob_is_the_pixel_mean_of_a_numpy_gaussian():
    rng = np.random.default_rng(1)
    x, mean = rng.normal(size=(2, 3, 4, 4, 3)).astype(np.float32)
    std = np.array([0.3, 1.7, 0.9], np.float32)
    lp = np.asarray(step_logprob(jnp.asarray(x), jnp.asarray(mean), jnp.asarray(std)))
    s = std[:, None, None, None]
    ref = (-((x - mean) ** 2) / (2 * s**2) - np.log(s * np.sqrt(2 * np.pi))).mean((1, 2, 3))
    np.testing.assert_allclose(lp, ref, rtol=1e-5)
    full = np.asarray(gaussian_logpdf(jnp.asarray(x), jnp.asarray(mean), jnp.asarray(std)))
    assert full.shape == x.shape


def test_sde_reduces_to_the_ode_without_noise():
    rng = np.random.default_rng(2)
    x, v = rng.normal(size=(2, 2, 4, 4, 3)).astype(np.float32)
    t, dt = jnp.array([0.6, 0.3]), jnp.array([-0.1, -0.1])
    m = sde_mean(jnp.asarray(x), jnp.asarray(v), t, dt, noise_level=0.0, t_cap=0.9)
    np.testing.assert_allclose(np.asarray(m), x + v * -0.1, rtol=1e-6)
    assert np.all(np.asarray(sde_std(t, dt, noise_level=0.0, t_cap=0.9)) == 0)
