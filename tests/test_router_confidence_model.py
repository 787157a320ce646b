"""The unfamiliarity-aware confidence: a logistic model of log-odds and unfamiliarity."""

from __future__ import annotations

import numpy as np
import pytest

from studio_align.router.calibration import Calibration, fit_confidence_model, fit_logistic


def test_logistic_recovers_known_coefficients_on_any_feature_scale() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20000, 2))
    y = rng.random(len(x)) < 1.0 / (1.0 + np.exp(-(x @ np.array([1.5, -0.7]) + 0.3)))
    # the same data with features moved and stretched: the weights must follow
    w, b = fit_logistic(x * [2.0, 5.0] + [1.0, -3.0], y, l2=0.0)
    np.testing.assert_allclose(w, [0.75, -0.14], atol=0.04)
    assert b == pytest.approx(0.3 - 0.75 - 0.42, abs=0.08)


def test_unfamiliar_requests_lose_confidence_familiar_ones_do_not_gain_from_distance() -> None:
    rng = np.random.default_rng(1)
    n = 600
    conf = rng.uniform(0.6, 0.99, n)
    u = rng.uniform(0.0, 10.0, n)
    # right as often as claimed when familiar (u < 5), a coin flip when unfamiliar
    correct = np.where(u < 5, rng.random(n) < conf, rng.random(n) < 0.5)
    slope, w, bias = fit_confidence_model(conf, u, correct)
    assert w < 0
    cal = Calibration(slope=slope, ood_weight=w, bias=bias)
    same = np.full(2, 0.95)
    near, far = cal.adjust(same, np.array([1.0, 9.0]))
    assert far < near
    far_rows = u >= 5
    # the adjusted confidence of unfamiliar rows tracks their accuracy; the raw one did not
    raw_gap = abs(conf[far_rows].mean() - correct[far_rows].mean())
    new_gap = abs(cal.adjust(conf, u)[far_rows].mean() - correct[far_rows].mean())
    assert new_gap < raw_gap / 3


def test_distance_that_predicts_success_is_clamped_to_no_effect() -> None:
    rng = np.random.default_rng(2)
    conf = rng.uniform(0.5, 0.99, 400)
    u = rng.uniform(0.0, 10.0, 400)
    correct = rng.random(400) < np.clip(conf + 0.04 * (u - 5), 0, 1)
    _, w, _ = fit_confidence_model(conf, u, correct)
    assert w == 0.0


def test_identity_by_default_and_saved_with_the_checkpoint(tmp_path) -> None:
    conf = np.array([0.2, 0.7, 0.99])
    np.testing.assert_array_equal(Calibration().adjust(conf, np.array([0.0, 50.0, 3.0])), conf)
    Calibration(slope=0.8, ood_weight=-0.25, bias=0.1).save(tmp_path)
    back = Calibration.load(tmp_path)
    assert back is not None
    assert (back.slope, back.ood_weight, back.bias) == (0.8, -0.25, 0.1)
    expect = 1 / (1 + np.exp(-(0.8 * np.log(0.7 / 0.3) - 0.25 * 4.0 + 0.1)))
    assert back.adjust(np.array([0.7]), np.array([4.0]))[0] == pytest.approx(expect)


def test_validation_all_right_or_all_wrong_keeps_the_identity() -> None:
    conf = np.linspace(0.3, 0.99, 50)
    u = np.linspace(0.0, 9.0, 50)
    for every in (True, False):
        assert fit_confidence_model(conf, u, [every] * 50) == (1.0, 0.0, 0.0)
