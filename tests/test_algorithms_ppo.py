"""PPO: GAE against a NumPy reference, shaped rewards and the loss on a hand-computed batch."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from studio_align.algorithms.ppo import gae, ppo_loss, shaped_rewards, whiten


def gae_reference(r: np.ndarray, v: np.ndarray, m: np.ndarray, gamma: float, lam: float):
    """The textbook loop, one row at a time, over the real tokens only."""
    adv = np.zeros_like(r)
    for b in range(r.shape[0]):
        n = int(m[b].sum())
        last = 0.0
        for t in reversed(range(n)):
            nv = v[b, t + 1] if t + 1 < n else 0.0
            delta = r[b, t] + gamma * nv - v[b, t]
            last = delta + gamma * lam * last
            adv[b, t] = last
    return adv, (adv + v) * m


@pytest.mark.parametrize(("gamma", "lam"), [(1.0, 0.95), (0.9, 0.5), (0.99, 1.0), (1.0, 0.0)])
def test_gae_matches_numpy_reference(gamma: float, lam: float) -> None:
    rng = np.random.default_rng(0)
    r = rng.normal(size=(5, 7)).astype(np.float32)
    v = rng.normal(size=(5, 7)).astype(np.float32)
    lengths = np.array([7, 3, 1, 5, 0])
    m = (np.arange(7)[None] < lengths[:, None]).astype(np.float32)
    want_a, want_r = gae_reference(r * m, v * m, m, gamma, lam)
    got_a, got_r = gae(jnp.asarray(r), jnp.asarray(v), jnp.asarray(m), gamma=gamma, lam=lam)
    np.testing.assert_allclose(got_a, want_a, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_r, want_r, rtol=1e-5, atol=1e-5)


def test_gae_hand_values() -> None:
    # one row of 3 tokens, reward 1 at the end, values (0.5, 0.2, 0.4), gamma 1, lam 0.5
    a, ret = gae(jnp.array([[0.0, 0.0, 1.0]]), jnp.array([[0.5, 0.2, 0.4]]),
                 jnp.ones((1, 3)), gamma=1.0, lam=0.5)  # fmt: skip
    # deltas: 0 + 0.2 - 0.5 = -0.3; 0 + 0.4 - 0.2 = 0.2; 1 + 0 - 0.4 = 0.6
    # A2 = 0.6; A1 = 0.2 + 0.5 * 0.6 = 0.5; A0 = -0.3 + 0.5 * 0.5 = -0.05
    np.testing.assert_allclose(a, [[-0.05, 0.5, 0.6]], atol=1e-6)
    np.testing.assert_allclose(ret, [[0.45, 0.7, 1.0]], atol=1e-6)


def test_shaped_rewards_put_the_score_on_the_last_token() -> None:
    lp = jnp.array([[-1.0, -2.0, -3.0], [-1.0, -1.0, 0.0]])
    ref = jnp.array([[-1.5, -2.0, -2.0], [-0.5, -1.0, 0.0]])
    mask = jnp.array([[1, 1, 0], [1, 0, 0]], jnp.float32)
    r, m = shaped_rewards(jnp.array([2.0, -1.0]), lp, ref, mask, kl_coef=0.1)
    # row 0: k1 = (0.5, 0); row 1: k1 = (-0.5)
    np.testing.assert_allclose(r, [[-0.05, 2.0, 0.0], [0.05 - 1.0, 0.0, 0.0]], atol=1e-6)
    assert float(m["kl"]) == pytest.approx(0.0)  # (0.5 + -0.5) / 2


def test_ppo_loss_hand_computed_batch() -> None:
    old = jnp.log(jnp.array([[0.5, 0.5]]))
    # ratios 1.5 (clipped to 1.2 for A > 0) and 0.6 (clipped to 0.8 for A < 0)
    lp = jnp.log(jnp.array([[0.75, 0.3]]))
    adv = jnp.array([[1.0, -2.0]])
    values = jnp.array([[1.0, 0.0]])
    old_values = jnp.array([[0.5, 0.1]])
    returns = jnp.array([[2.0, -1.0]])
    mask = jnp.ones((1, 2))
    loss, m = ppo_loss(lp, old, adv, values, old_values, returns, mask,
                       epsilon=0.2, value_clip=0.2, vf_coef=0.5)  # fmt: skip
    # policy: -min(1.5*1, 1.2*1) = -1.2; -min(0.6*-2, 0.8*-2) = 1.6; mean 0.2
    assert float(m["loss/policy"]) == pytest.approx(0.2, abs=1e-5)
    # value token 0: v 1.0 (clipped 0.7): max((1-2)^2, (0.7-2)^2)/2 = 0.845
    # value token 1: v 0.0 (within 0.1 +- 0.2): (0+1)^2/2 = 0.5; mean 0.6725
    assert float(m["loss/value"]) == pytest.approx(0.6725, abs=1e-5)
    assert float(loss) == pytest.approx(0.2 + 0.5 * 0.6725, abs=1e-5)
    assert float(m["clip_fraction"]) == pytest.approx(1.0)
    assert float(m["value_clip_fraction"]) == pytest.approx(0.5)


def test_ppo_loss_masks_padding_and_gradient_flows() -> None:
    import jax

    rng = np.random.default_rng(1)
    lp = jnp.asarray(rng.normal(size=(3, 4)) - 1)
    mask = jnp.array([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]], jnp.float32)
    args = (lp, jnp.asarray(rng.normal(size=(3, 4))), jnp.zeros((3, 4)), jnp.zeros((3, 4)),
            jnp.asarray(rng.normal(size=(3, 4))))  # fmt: skip

    def f(lp: jnp.ndarray, v: jnp.ndarray) -> jnp.ndarray:
        return ppo_loss(lp, lp, args[1], v, args[2], args[4], mask)[0]

    g_lp, g_v = jax.grad(f, argnums=(0, 1))(lp, jnp.zeros((3, 4)))
    assert np.all(np.asarray(g_lp)[np.asarray(mask) == 0] == 0)
    assert np.all(np.asarray(g_v)[np.asarray(mask) == 0] == 0)
    assert np.any(np.asarray(g_v) != 0) and np.any(np.asarray(g_lp) != 0)
    # padding values do not move the loss
    noisy = jnp.where(mask > 0, lp, 123.0)
    assert float(f(noisy, jnp.zeros((3, 4)))) == pytest.approx(float(f(lp, jnp.zeros((3, 4)))))


def test_whiten_masked() -> None:
    x = jnp.array([[1.0, 3.0, 100.0]])
    w = whiten(x, jnp.array([[1.0, 1.0, 0.0]]))
    np.testing.assert_allclose(w, [[-1.0, 1.0, 0.0]], atol=1e-4)
