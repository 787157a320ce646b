"""Flow samplers: SDE per-step log-probs against a NumPy Gaussian density, compile reuse."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flow_helpers import ARCHS, conds, tiny_model

from studio_align.algorithms.flow import sde_std
from studio_align.generation import flow_sampler as fs
from studio_align.verticals.flow.policy import FlowPolicy


def _numpy_step_logprob(x, x_next, v, t, t_next, a, t_cap):
    """Flow-GRPO's SDE step density, written out independently in NumPy."""
    dt = t_next - t
    tc = min(t, t_cap)
    std = a * np.sqrt(tc / (1 - tc)) * np.sqrt(-dt)
    mean = x + (v + (a**2 * tc / (1 - tc)) / (2 * t) * (x + (1 - t) * v)) * dt
    lp = -((x_next - mean) ** 2) / (2 * std**2) - np.log(std) - 0.5 * np.log(2 * np.pi)
    return lp.reshape(len(x), -1).mean(1)


@pytest.mark.slow  # ~25 s on a busy 2-core VM; the policy-logps test below keeps the SDE path in the default run
@pytest.mark.parametrize("arch", ARCHS)
def test_sde_logprobs_match_a_numpy_gaussian_density(arch):
    model = tiny_model(arch=arch)
    verts, tags = conds(3)
    cfg = fs.SDEConfig(steps=4, noise_level=0.7)
    traj, logps = fs.sample_sde(model, verts, tags, cfg, key=jax.random.key(3))
    assert traj.shape == (3, 5, 8, 8, 3) and logps.shape == (3, 4)
    ts = fs.time_grid(cfg.steps)
    for k in range(cfg.steps):
        x = traj[:, k]
        v = np.asarray(model(jnp.asarray(x), jnp.full((3,), ts[k]), jnp.asarray(verts),
                             jnp.asarray(tags)))  # fmt: skip
        ref = _numpy_step_logprob(x.astype(np.float64), traj[:, k + 1].astype(np.float64),
                                  v.astype(np.float64), float(ts[k]), float(ts[k + 1]),
                                  0.7, cfg.t_cap)  # fmt: skip
        np.testing.assert_allclose(logps[:, k], ref, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("arch", ARCHS)
def test_policy_logps_recompute_the_sampler_logps(arch):
    model = tiny_model(1, arch=arch)
    verts, tags = conds(2, seed=1)
    policy = FlowPolicy(verts, tags, fs.SDEConfig(steps=3, guidance=1.5))
    roll = policy.sample(model, [0, 1], 2, jax.random.key(0))
    lp, mask, ent = policy.logps(model, {k: jnp.asarray(v) for k, v in roll.batch.items()})
    np.testing.assert_allclose(np.asarray(lp), roll.old_logps, atol=1e-4)
    assert mask.shape == (4, 3) and bool(mask.all()) and ent.shape == (4, 3)
    assert roll.columns["groups"] == [0, 0, 1, 1]
    assert roll.columns["images"][0].shape == (8, 8, 3)


def test_sde_without_stochastic_steps_is_the_ode():
    """Flow-GRPO-Fast's ODE steps: with no SDE step the rollout lands where Euler does."""
    model = tiny_model(4)
    verts, tags = conds(2, seed=2)
    cfg = fs.SDEConfig(steps=4)
    traj, _ = fs.sample_sde(model, verts, tags, cfg, key=jax.random.key(5),
                            stochastic=np.zeros(4, bool))  # fmt: skip
    ode = fs.sample_ode(model, verts, tags, steps=4, noise=traj[:, 0])
    np.testing.assert_allclose(traj[:, -1], ode, atol=1e-5)
    noisy, _ = fs.sample_sde(model, verts, tags, cfg, key=jax.random.key(5))
    assert np.abs(noisy[:, -1] - ode).max() > 0.05  # the default's steps are stochastic


@pytest.mark.parametrize("ratio_norm", [False, True])
def test_windowed_policy_trains_on_its_window_and_recomputes_its_logps(ratio_norm):
    """`window = 2` of 8 steps: two transitions per sample, starting in the first half, the
    policy's log-probs equal the rollout's (on-policy ratio 1), scaled alike by ratio_norm."""
    model = tiny_model(1)
    verts, tags = conds(2, seed=1)
    policy = FlowPolicy(verts, tags, fs.SDEConfig(steps=8, window=2, ratio_norm=ratio_norm))
    starts = set()
    for seed in range(6):
        roll = policy.sample(model, [0, 1], 2, jax.random.key(seed))
        step = roll.batch["step"]
        assert roll.batch["x"].shape[:2] == (4, 2) and roll.old_logps.shape == (4, 2)
        assert (step[:, 1] == step[:, 0] + 1).all() and len(set(step[:, 0])) == 1
        starts.add(int(step[0, 0]))
        lp, _, _ = policy.logps(model, {k: jnp.asarray(v) for k, v in roll.batch.items()})
        np.testing.assert_allclose(np.asarray(lp), roll.old_logps, atol=1e-4)
    assert starts <= {0, 1, 2} and len(starts) > 1  # random starts among the first half
    plain = FlowPolicy(verts, tags, fs.SDEConfig(steps=8, window=2))
    same = plain.sample(model, [0, 1], 2, jax.random.key(0))
    scaled = policy.sample(model, [0, 1], 2, jax.random.key(0))
    std = np.asarray(sde_std(policy._t, policy._dt, noise_level=0.7, t_cap=policy.sde.t_cap))
    k = same.batch["step"][0]
    expect = same.old_logps * (std[k] / std.mean() if ratio_norm else 1.0)
    np.testing.assert_allclose(scaled.old_logps, expect, rtol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
def test_ode_sampler_compiles_once_per_bucket(arch):
    model = tiny_model(2, arch=arch)
    verts, tags = conds(5)
    fs.sample_ode(model, verts[:3], tags[:3], steps=3, seed=0)  # bucket 4
    before = fs.compile_count()
    out = fs.sample_ode(model, verts[:4], tags[:4], steps=3, seed=1)  # same bucket
    other = tiny_model(5, arch=arch)  # new weights, same architecture
    fs.sample_ode(other, verts[:3], tags[:3], steps=3, seed=2)
    assert fs.compile_count() == before
    assert out.shape == (4, 8, 8, 3) and np.isfinite(out).all()
    fs.sample_ode(model, verts, tags, steps=3, seed=0)  # bucket 8: one new trace
    assert fs.compile_count() == before + 1


@pytest.mark.parametrize("arch", ARCHS)
def test_same_noise_same_images(arch):
    model = tiny_model(3, arch=arch)
    verts, tags = conds(2)
    a = fs.sample_ode(model, verts, tags, steps=2, seed=7, guidance=2.0)
    b = fs.sample_ode(model, verts, tags, steps=2, seed=7, guidance=2.0)
    np.testing.assert_array_equal(a, b)
