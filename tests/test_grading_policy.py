"""Grading policy (Gaussian), behaviour cloning from retouch logs, simulated creator logs."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from studio_align.data.reader import LogReader
from studio_align.reward_models.color_stats import FEATURE_DIM
from studio_align.simulate.grading.creator import WARM_TASTE, SimulatedCreator, write_creator_logs
from studio_align.verticals.grading.policy import GradingPolicy, request_features
from studio_align.verticals.grading.renderer import N_PARAMS


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    creator = SimulatedCreator("warm", WARM_TASTE, temperature=1.0)
    return write_creator_logs(
        tmp_path_factory.mktemp("g"), [(creator, 6, 40)], seed=0, size=(32, 32)
    ), creator


def test_log_probs_are_the_gaussian_density():
    pol = GradingPolicy(rngs=nnx.Rngs(0))
    f = jnp.asarray(np.random.default_rng(0).normal(size=(3, FEATURE_DIM)), jnp.float32)
    r = jnp.asarray(request_features(["warm", "cool", ""]))
    a = jnp.asarray(np.random.default_rng(1).normal(size=(3, N_PARAMS)), jnp.float32)
    mean, log_std = pol(f, r)
    sd = np.exp(np.asarray(log_std))
    want = (
        -0.5 * ((np.asarray(a) - np.asarray(mean)) / sd) ** 2
        - np.log(sd)
        - 0.5 * math.log(2 * math.pi)
    )
    np.testing.assert_allclose(np.asarray(pol.log_probs(f, r, a)), want, rtol=1e-5, atol=1e-5)


def test_samples_are_group_contiguous():
    pol = GradingPolicy(rngs=nnx.Rngs(0), init_log_std=-4.0)
    f = jnp.asarray(np.random.default_rng(0).normal(size=(2, FEATURE_DIM)) * 3, jnp.float32)
    r = jnp.zeros((2, pol.request_dim))
    acts, lps = pol.sample(jax.random.key(0), f, r, 5)
    assert acts.shape == (10, N_PARAMS) and lps.shape == (10, N_PARAMS)
    mean = np.asarray(pol.mode(f, r))
    np.testing.assert_allclose(np.asarray(acts[:5]), np.repeat(mean[:1], 5, 0), atol=0.1)
    np.testing.assert_allclose(np.asarray(acts[5:]), np.repeat(mean[1:], 5, 0), atol=0.1)


def test_request_features():
    a = request_features(["Warm cinematic film", "warm cinematic film", "cool street", ""])
    np.testing.assert_array_equal(a[0], a[1])
    assert np.isclose(np.linalg.norm(a[0]), 1.0) and not np.allclose(a[0], a[2])
    assert not a[3].any()


def test_creator_logs_are_valid_design_format(logdir):
    log, _ = logdir
    reader = LogReader([log])
    events = [e.event for e in reader]
    assert reader.summary.invalid_count == 0
    assert {e.type for e in events} == {"selection", "retouch"}
