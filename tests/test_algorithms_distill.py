"""Distillation losses: hand values and the generalised JSD's limits at beta = 0 and 1."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from studio_align.algorithms.distill import (
    distill_loss,
    forward_kl,
    generalised_jsd,
    reverse_kl,
)


def _dists(seed: int = 0) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    rng = np.random.default_rng(seed)
    s = jax.nn.log_softmax(jnp.asarray(rng.normal(size=(2, 3, 5))), axis=-1)
    t = jax.nn.log_softmax(jnp.asarray(2 * rng.normal(size=(2, 3, 5))), axis=-1)
    return s, t, jnp.array([[1, 1, 0], [1, 0, 0]], jnp.float32)


def test_forward_and_reverse_kl_hand_values() -> None:
    p = jnp.log(jnp.array([[[0.5, 0.5]]]))  # teacher
    q = jnp.log(jnp.array([[[0.25, 0.75]]]))  # student
    m = jnp.ones((1, 1))
    fwd = 0.5 * np.log(0.5 / 0.25) + 0.5 * np.log(0.5 / 0.75)
    rev = 0.25 * np.log(0.25 / 0.5) + 0.75 * np.log(0.75 / 0.5)
    assert float(forward_kl(q, p, m)[0]) == pytest.approx(fwd, rel=1e-5)
    assert float(reverse_kl(q, p, m)[0]) == pytest.approx(rev, rel=1e-5)


def test_jsd_endpoints_are_forward_and_reverse_kl() -> None:
    s, t, m = _dists()
    assert float(generalised_jsd(s, t, m, beta=0.0)[0]) == pytest.approx(
        float(forward_kl(s, t, m)[0])
    )
    assert float(generalised_jsd(s, t, m, beta=1.0)[0]) == pytest.approx(
        float(reverse_kl(s, t, m)[0])
    )


def test_jsd_tends_to_scaled_kls_near_the_endpoints() -> None:
    s, t, m = _dists(1)
    fwd, rev = float(forward_kl(s, t, m)[0]), float(reverse_kl(s, t, m)[0])
    for beta, want, scale in ((1e-4, fwd, 1e-4), (1 - 1e-4, rev, 1e-4)):
        jsd = float(generalised_jsd(s, t, m, beta=beta)[0])
        assert jsd / scale == pytest.approx(want, rel=2e-3)
    half = float(generalised_jsd(s, t, m, beta=0.5)[0])
    assert 0 < half <= np.log(2) + 1e-6  # the symmetric JSD is bounded by log 2


def test_losses_vanish_when_student_equals_teacher_and_ignore_masked_positions() -> None:
    s, t, m = _dists(2)
    for beta in (0.0, 0.3, 1.0):
        assert float(generalised_jsd(t, t, m, beta=beta)[0]) == pytest.approx(0.0, abs=1e-6)
    noisy = s.at[0, 2].set(jax.nn.log_softmax(jnp.arange(5.0)))  # masked position
    assert float(forward_kl(noisy, t, m)[0]) == pytest.approx(float(forward_kl(s, t, m)[0]))


def test_zero_probability_candidates_give_finite_gradients() -> None:
    t = jnp.array([[[0.0, -jnp.inf, -1e30]]])  # teacher: all mass on candidate 0
    s = jnp.array([[[jnp.log(0.5), jnp.log(0.5), -1e30]]])
    m = jnp.ones((1, 1))
    for beta in (0.0, 0.5, 1.0):
        g = jax.grad(lambda x, b=beta: generalised_jsd(jax.nn.log_softmax(x), t, m, beta=b)[0])(s)
        assert np.all(np.isfinite(np.asarray(g)))


def test_distill_loss_names() -> None:
    s, t, m = _dists()
    assert float(distill_loss("jsd", beta=0.0)(s, t, m)[0]) == pytest.approx(
        float(forward_kl(s, t, m)[0])
    )
    with pytest.raises(ValueError, match="unknown divergence 'kl'"):
        distill_loss("kl")
