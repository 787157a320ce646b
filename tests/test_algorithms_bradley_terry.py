"""Bradley-Terry: hand values, accuracy and margin metrics, the stateful helpers."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest

from studio_align.algorithms import adaptive_kl, bradley_terry_loss, fixed_kl, running_normalizer


def test_bradley_terry_hand_values() -> None:
    loss, m = bradley_terry_loss(jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0]))
    assert float(loss) == pytest.approx((math.log1p(math.exp(-1)) + math.log1p(math.exp(1))) / 2)
    assert float(m["accuracy"]) == 0.5
    assert float(m["margin"]) == 0.0
    loss, _ = bradley_terry_loss(jnp.array([2.0]), jnp.array([0.0]), margin=1.0)
    assert float(loss) == pytest.approx(math.log1p(math.exp(-1.0)))
    loss, _ = bradley_terry_loss(
        jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0]), weights=jnp.array([1.0, 0.0])
    )
    assert float(loss) == pytest.approx(math.log1p(math.exp(-1)))


def test_adaptive_kl_controller() -> None:
    ctl = adaptive_kl(0.1, target=1.0, horizon=10)
    s = ctl.init()
    up = ctl.update(s, jnp.asarray(3.0), 1)  # error clipped to +0.2
    assert float(up.coef) == pytest.approx(0.1 * (1 + 0.2 / 10))
    down = ctl.update(s, jnp.asarray(0.9), 2)
    assert float(down.coef) == pytest.approx(0.1 * (1 - 0.1 * 2 / 10))
    f = fixed_kl(0.05)
    assert float(f.update(f.init(), jnp.asarray(9.0), 1).coef) == pytest.approx(0.05)


def test_running_normalizer_matches_full_statistics() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(3, 2, size=7), rng.normal(3, 2, size=5)
    norm = running_normalizer(eps=0.0)
    s = norm.init()
    _, s = norm.update(s, jnp.asarray(a))
    out, s = norm.update(s, jnp.asarray(b))
    full = np.concatenate([a, b])
    assert float(s.mean) == pytest.approx(full.mean(), rel=1e-5)
    assert float(s.m2 / s.n) == pytest.approx(full.var(), rel=1e-5)
    np.testing.assert_allclose(out, (b - full.mean()) / full.std(), rtol=1e-4)
