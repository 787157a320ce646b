"""GRPO family: hand-computed advantages, clipping, KL estimators, aggregations, GSPO."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from studio_align.algorithms import grpo_advantages, grpo_loss, zero_variance_groups

REWARDS = jnp.array([1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 2.0])


def test_grpo_advantages_hand_values() -> None:
    adv, m = grpo_advantages(REWARDS, 4, estimator="grpo")
    std = math.sqrt(1.0 / 3.0)  # ddof=1 std of (1, 0, 0, 1)
    a = 0.5 / (std + 1e-4)
    np.testing.assert_allclose(adv, [a, -a, -a, a, 0, 0, 0, 0], rtol=1e-5)
    assert float(m["zero_std_fraction"]) == 0.5
    assert float(m["reward/mean"]) == pytest.approx(1.25)


def test_dr_grpo_and_rloo_hand_values() -> None:
    dr, _ = grpo_advantages(REWARDS, 4, estimator="dr_grpo")
    np.testing.assert_allclose(dr, [0.5, -0.5, -0.5, 0.5, 0, 0, 0, 0])
    rloo, _ = grpo_advantages(REWARDS, 4, estimator="rloo")
    # 1 - mean(0, 0, 1) = 2/3 ; 0 - mean(1, 0, 1) = -2/3
    np.testing.assert_allclose(rloo, [2 / 3, -2 / 3, -2 / 3, 2 / 3, 0, 0, 0, 0], rtol=1e-6)
    rloo3, _ = grpo_advantages(jnp.array([3.0, 0.0, 0.0]), 3, estimator="rloo")
    np.testing.assert_allclose(rloo3, [3.0, -1.5, -1.5])


def test_advantages_reject_bad_layout() -> None:
    with pytest.raises(ValueError, match="group_size=3"):
        grpo_advantages(REWARDS, 3)
    with pytest.raises(ValueError, match="estimator 'ppo'"):
        grpo_advantages(REWARDS, 4, estimator="ppo")


def test_zero_variance_groups() -> None:
    assert zero_variance_groups(REWARDS, 4).tolist() == [False, True]
    assert zero_variance_groups(REWARDS, 2).tolist() == [False, False, True, True]


@pytest.mark.parametrize("estimator", ["grpo", "dr_grpo", "rloo"])
def test_loss_unchanged_by_constant_shift_per_group(estimator: str) -> None:
    rng = np.random.default_rng(0)
    r = jnp.asarray(rng.normal(size=12))
    shift = jnp.repeat(jnp.array([5.0, -3.0, 100.0]), 4)
    lp = jnp.asarray(rng.normal(size=(12, 5)) - 2)
    old = lp + jnp.asarray(rng.normal(size=(12, 5)) * 0.1)
    ref = lp + jnp.asarray(rng.normal(size=(12, 5)) * 0.1)
    mask = jnp.asarray(rng.random((12, 5)) > 0.2)
    out = []
    for rewards in (r, r + shift):
        adv, _ = grpo_advantages(rewards, 4, estimator=estimator)
        loss, _ = grpo_loss(lp, old, ref, adv, mask, epsilon=0.2, beta=0.04)
        out.append(float(loss))
    assert out[0] == pytest.approx(out[1], rel=1e-4, abs=1e-5)


def _two_token(a: float, **kw):  # type: ignore[no-untyped-def]
    old = jnp.zeros((1, 2))
    lp = jnp.log(jnp.array([[1.5, 0.5]]))  # ratios 1.5 and 0.5
    return grpo_loss(lp, old, None, jnp.array([a]), jnp.ones((1, 2)), **kw)


def test_clipping_hand_values() -> None:
    loss, m = _two_token(1.0, epsilon=0.2)
    assert float(loss) == pytest.approx(-(1.2 + 0.5) / 2, rel=1e-6)
    assert float(m["clip_fraction"]) == 0.5 and float(m["clip_fraction/high"]) == 0.5
    loss, m = _two_token(-1.0, epsilon=0.2)
    assert float(loss) == pytest.approx((1.5 + 0.8) / 2, rel=1e-6)
    assert float(m["clip_fraction/low"]) == 0.5
    # DAPO clip-higher: upper bound 1.6 no longer clips the 1.5 ratio
    loss, m = _two_token(1.0, epsilon=0.2, epsilon_high=0.6)
    assert float(loss) == pytest.approx(-(1.5 + 0.5) / 2, rel=1e-6)
    assert float(m["clip_fraction"]) == 0.0


def test_decoupled_ppo_hand_values() -> None:
    """Decoupled PPO: clip against the proximal policy, weight by prox / behaviour (capped)."""
    old = jnp.log(jnp.array([[0.2, 0.5]]))  # the stale rollout's policy
    prox = jnp.log(jnp.array([[0.4, 0.5]]))  # where this update starts: token 0 moved 2x
    mask, adv = jnp.ones((1, 2)), jnp.array([1.0])
    # against the rollout, token 0's ratio (2.0) is clipped: its gradient is gone
    grad_clip = jax.grad(lambda lp: grpo_loss(lp, old, None, adv, mask, epsilon=0.2)[0])(prox)
    assert float(grad_clip[0, 0]) == 0.0
    # against the proximal policy the ratio is 1 and token 0 is weighted 2 = 0.4 / 0.2
    loss, m = grpo_loss(prox, old, None, adv, mask, epsilon=0.2, prox_logps=prox)
    assert float(loss) == pytest.approx(-(2.0 + 1.0) / 2, rel=1e-6)
    assert float(m["is_weight/mean"]) == pytest.approx(1.5, rel=1e-6)
    assert float(m["clip_fraction"]) == 0.0
    grad = jax.grad(lambda lp: grpo_loss(lp, old, None, adv, mask, prox_logps=prox)[0])(prox)
    np.testing.assert_allclose(grad, [[-1.0, -0.5]], rtol=1e-6)  # -w * A / T per token
    # the weight is capped, and prox == old is the plain clipped loss
    loss, _ = grpo_loss(prox, old, None, adv, mask, prox_logps=prox, max_is_weight=1.5)
    assert float(loss) == pytest.approx(-(1.5 + 1.0) / 2, rel=1e-6)
    lp = jnp.log(jnp.array([[0.3, 0.6]]))
    plain, _ = grpo_loss(lp, old, None, adv, mask, epsilon=0.2)
    same, _ = grpo_loss(lp, old, None, adv, mask, epsilon=0.2, prox_logps=old)
    assert float(same) == pytest.approx(float(plain), rel=1e-6)


def test_on_policy_loss_is_minus_advantage() -> None:
    lp = jnp.array([[-1.0, -2.0]])
    loss, m = grpo_loss(lp, lp, None, jnp.array([2.0]), jnp.ones((1, 2)), epsilon=0.2)
    assert float(loss) == pytest.approx(-2.0)
    assert float(m["ratio/mean"]) == pytest.approx(1.0)
    assert float(m["kl/old"]) == pytest.approx(0.0, abs=1e-7)
    _, m = grpo_loss(lp, lp - jnp.log(2.0), None, jnp.array([2.0]), jnp.ones((1, 2)))
    # k3 with d = old - new = -log 2: e^d - d - 1
    assert float(m["kl/old"]) == pytest.approx(0.5 + math.log(2.0) - 1.0, rel=1e-5)


def test_kl_estimators_hand_values() -> None:
    lp, ref = jnp.log(jnp.array([[0.5]])), jnp.log(jnp.array([[0.25]]))
    zero_adv, mask = jnp.array([0.0]), jnp.ones((1, 1))
    l2 = math.log(2.0)
    for kl, expected in (("k1", l2), ("k2", 0.5 * l2 * l2), ("k3", 0.5 + l2 - 1.0)):
        loss, m = grpo_loss(lp, lp, ref, zero_adv, mask, beta=0.1, kl=kl)
        assert float(m["kl"]) == pytest.approx(expected, rel=1e-6), kl
        assert float(loss) == pytest.approx(0.1 * expected, rel=1e-6), kl


def test_k3_nonnegative_with_zero_gradient_at_reference() -> None:
    ref = jnp.array([[-1.0, -3.0]])
    g = jax.grad(
        lambda x: grpo_loss(x, x, ref, jnp.zeros(1), jnp.ones((1, 2)), beta=1.0, kl="k3")[0]
    )(ref)
    np.testing.assert_allclose(g, 0.0, atol=1e-7)
    rng = np.random.default_rng(3)
    lp = jnp.asarray(rng.normal(size=(4, 6)))
    _, m = grpo_loss(
        lp, lp, lp + jnp.asarray(rng.normal(size=(4, 6))), jnp.zeros(4), jnp.ones((4, 6)), beta=1.0
    )
    assert float(m["kl"]) > 0


def test_aggregations_hand_values() -> None:
    lp = jnp.zeros((2, 3))
    mask = jnp.array([[1, 1, 0], [1, 0, 0]])
    adv = jnp.array([1.0, 3.0])  # per-token losses: (-1, -1) and (-3)
    expected = {
        "token-mean": -5 / 3,
        "sequence-mean-token-mean": -2.0,
        "sequence-mean-token-scale": -5 / 6,
    }
    for agg, want in expected.items():
        loss, _ = grpo_loss(lp, lp, None, adv, mask, aggregation=agg)
        assert float(loss) == pytest.approx(want, rel=1e-6), agg
    loss, _ = grpo_loss(
        lp, lp, None, adv, mask, aggregation="sequence-mean-token-scale", max_tokens=5
    )
    assert float(loss) == pytest.approx(-0.5)


def test_gspo_sequence_ratio_hand_value_and_gradient() -> None:
    old = jnp.zeros((1, 2))
    lp = jnp.log(jnp.array([[1.5, 0.5]]))
    s = math.sqrt(0.75)  # exp(mean(log 1.5, log 0.5))

    def f(x):
        return grpo_loss(x, old, None, jnp.array([1.0]), jnp.ones((1, 2)), importance="sequence")[0]

    assert float(f(lp)) == pytest.approx(-s, rel=1e-6)
    np.testing.assert_allclose(jax.grad(f)(lp), [[-s / 2, -s / 2]], rtol=1e-5)


def test_positive_advantage_step_raises_completion_logp() -> None:
    logits = jnp.array([0.2, -0.1, 0.0])
    tok = jnp.array([[1, 2]])  # a two-token completion from a context-free policy

    def lps(w: jax.Array) -> jax.Array:
        return jax.nn.log_softmax(w)[tok]

    old = lps(logits)
    adv = jnp.array([1.0])
    g = jax.grad(lambda w: grpo_loss(lps(w), old, None, adv, jnp.ones((1, 2)))[0])(logits)
    assert float(lps(logits - 0.1 * g).sum()) > float(old.sum())


def test_static_options_under_jit() -> None:
    f = jax.jit(
        grpo_loss,
        static_argnames=(
            "epsilon",
            "epsilon_high",
            "beta",
            "kl",
            "aggregation",
            "importance",
            "max_tokens",
        ),
    )
    lp = jnp.array([[-1.0, -2.0]])
    a, _ = f(
        lp,
        lp - 0.1,
        lp,
        jnp.array([1.0]),
        jnp.ones((1, 2)),
        beta=0.1,
        kl="k2",
        aggregation="token-mean",
    )
    b, _ = grpo_loss(
        lp,
        lp - 0.1,
        lp,
        jnp.array([1.0]),
        jnp.ones((1, 2)),
        beta=0.1,
        kl="k2",
        aggregation="token-mean",
    )
    assert float(a) == pytest.approx(float(b))


def test_overlong_penalty_hand_values() -> None:
    from studio_align.algorithms import overlong_penalty

    got = overlong_penalty(jnp.array([4, 6, 7, 8, 9]), max_tokens=8, buffer=4)
    np.testing.assert_allclose(got, [0.0, -0.5, -0.75, -1.0, -1.0])
    np.testing.assert_allclose(overlong_penalty(jnp.array([8, 9]), max_tokens=8, buffer=0), [0, -1])
