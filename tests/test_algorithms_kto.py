"""KTO: hand values, the textbook form at a zero reference point, the per-batch KL estimate."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from studio_align.algorithms import kto_kl_estimate, kto_loss


def sig(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def test_kto_hand_values_zero_reference() -> None:
    pol = jnp.array([-1.0, -1.0])
    ref = jnp.array([-2.0, -2.0])  # log-ratio 1 for both
    des = jnp.array([True, False])
    loss, m = kto_loss(pol, ref, des, beta=0.5, kl_reference=0.0)
    expected = ((1 - sig(0.5)) + (1 - sig(-0.5))) / 2
    assert float(loss) == pytest.approx(expected, rel=1e-6)
    assert float(m["kl"]) == 0.0
    assert float(m["rewards/chosen"]) == pytest.approx(0.5)
    assert float(m["rewards/rejected"]) == pytest.approx(0.5)


def test_kto_textbook_form_with_zero_kl() -> None:
    rng = np.random.default_rng(1)
    pol, ref = jnp.asarray(rng.normal(size=12)), jnp.asarray(rng.normal(size=12))
    des = jnp.asarray(rng.random(12) > 0.4)
    beta, wd, wu = 0.2, 1.0, 1.5
    loss, _ = kto_loss(
        pol, ref, des, beta=beta, kl_reference=0.0, desirable_weight=wd, undesirable_weight=wu
    )
    r = pol - ref
    textbook = jnp.where(
        des, wd * (1 - jax.nn.sigmoid(beta * r)), wu * (1 - jax.nn.sigmoid(-beta * r))
    )
    np.testing.assert_allclose(loss, textbook.mean(), rtol=1e-6)


def test_kl_estimate_is_clamped_mean_of_mismatched_pairs() -> None:
    # mean of (0.5, -0.8) is negative: clamped to zero
    assert float(kto_kl_estimate(jnp.array([-1.0, -2.0]), jnp.array([-1.5, -1.2]))) == 0.0
    assert float(kto_kl_estimate(jnp.array([-1.0, -2.0]), jnp.array([-1.5, -1.5]))) == 0.0
    assert float(
        kto_kl_estimate(jnp.array([-1.0, -1.0]), jnp.array([-1.3, -1.3]))
    ) == pytest.approx(0.3)


def test_kto_uses_mismatched_kl_as_reference_point() -> None:
    pol, ref, des = jnp.array([-1.0]), jnp.array([-2.0]), jnp.array([True])
    loss, m = kto_loss(
        pol, ref, des, beta=1.0, kl_policy_logps=jnp.array([-1.0]), kl_ref_logps=jnp.array([-1.4])
    )
    assert float(m["kl"]) == pytest.approx(0.4, rel=1e-6)
    assert float(loss) == pytest.approx(1 - sig(1.0 - 0.4), rel=1e-6)


def test_kto_reference_point_carries_no_gradient() -> None:
    ref = jnp.array([-2.0, -2.0])
    des = jnp.array([True, False])
    g_est = jax.grad(lambda p: kto_loss(p, ref, des, beta=0.5)[0])(jnp.array([-1.0, -1.5]))
    z0 = float(kto_kl_estimate(jnp.array([-1.0, -1.5]), ref))
    g_fix = jax.grad(lambda p: kto_loss(p, ref, des, beta=0.5, kl_reference=z0)[0])(
        jnp.array([-1.0, -1.5])
    )
    np.testing.assert_allclose(g_est, g_fix, rtol=1e-6)


def test_kto_gradient_direction() -> None:
    ref = jnp.array([-2.0, -2.0])
    des = jnp.array([True, False])
    g = jax.grad(lambda p: kto_loss(p, ref, des, beta=0.5, kl_reference=0.0)[0])(ref)
    assert float(g[0]) < 0 < float(g[1])  # descent raises the good, lowers the bad
