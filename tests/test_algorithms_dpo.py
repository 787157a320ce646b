"""DPO family: hand-computed values, textbook edge forms, gradient direction."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from studio_align.algorithms import dpo_loss, orpo_loss, simpo_loss


def sp(x: float) -> float:  # softplus: -log sigmoid(-x)
    return math.log1p(math.exp(x))


# chosen/rejected logps chosen so that the DPO logit h = (-1 - -2) - (-1.5 - -1.5) = 1
PC, PR, RC, RR = (jnp.array([v]) for v in (-1.0, -2.0, -1.5, -1.5))


@pytest.mark.parametrize(
    ("loss_type", "beta", "ls", "expected"),
    [
        ("sigmoid", 0.5, 0.0, sp(-0.5)),
        ("sigmoid", 0.5, 0.1, 0.9 * sp(-0.5) + 0.1 * sp(0.5)),  # cDPO
        ("robust", 0.5, 0.1, (0.9 * sp(-0.5) - 0.1 * sp(0.5)) / 0.8),
        ("hinge", 0.5, 0.0, 0.5),
        ("hinge", 2.0, 0.0, 0.0),
        ("ipo", 0.5, 0.0, 0.0),  # margin 1 equals 1/(2*0.5): IPO's target
        ("ipo", 0.25, 0.0, 1.0),  # (1 - 2)^2
    ],
)
def test_dpo_hand_values(loss_type: str, beta: float, ls: float, expected: float) -> None:
    loss, m = dpo_loss(PC, PR, RC, RR, beta=beta, loss_type=loss_type, label_smoothing=ls)
    assert float(loss) == pytest.approx(expected, rel=1e-6, abs=1e-7)
    assert float(m["rewards/chosen"]) == pytest.approx(beta * 0.5)
    assert float(m["rewards/rejected"]) == pytest.approx(beta * -0.5)
    assert float(m["rewards/margin"]) == pytest.approx(beta * 1.0)
    assert float(m["rewards/accuracy"]) == 1.0


def test_dpo_sigmoid_is_textbook_at_zero_smoothing() -> None:
    rng = np.random.default_rng(0)
    pc, pr, rc, rr = (jnp.asarray(rng.normal(size=16) - 5) for _ in range(4))
    beta = 0.3
    loss, _ = dpo_loss(pc, pr, rc, rr, beta=beta)
    margin = (pc - rc) - (pr - rr)
    textbook = -jnp.mean(jax.nn.log_sigmoid(beta * margin))
    np.testing.assert_allclose(loss, textbook, rtol=1e-6)
    # robust DPO with no label noise is plain DPO
    robust, _ = dpo_loss(pc, pr, rc, rr, beta=beta, loss_type="robust")
    np.testing.assert_allclose(robust, textbook, rtol=1e-6)


def test_dpo_accuracy_counts_pairs() -> None:
    pc = jnp.array([-1.0, -3.0, -2.0, -1.0])
    pr = jnp.array([-2.0, -1.0, -2.5, -0.5])
    z = jnp.zeros(4)
    _, m = dpo_loss(pc, pr, z, z, beta=1.0)
    assert float(m["rewards/accuracy"]) == 0.5


def test_unknown_loss_type_names_it() -> None:
    with pytest.raises(ValueError, match="bogus"):
        dpo_loss(PC, PR, RC, RR, beta=0.1, loss_type="bogus")


@pytest.mark.parametrize("loss_type", ["sigmoid", "robust", "hinge", "ipo"])
def test_dpo_gradient_step_prefers_chosen(loss_type: str) -> None:
    """One SGD step on a softmax policy raises log p(chosen) relative to log p(rejected)."""
    logits = jnp.array([0.3, -0.2, 0.1, 0.0])
    ref = jax.nn.log_softmax(logits)
    chosen, rejected = 1, 2

    def loss_fn(w: jax.Array) -> jax.Array:
        lp = jax.nn.log_softmax(w)
        loss, _ = dpo_loss(
            lp[chosen][None],
            lp[rejected][None],
            ref[chosen][None],
            ref[rejected][None],
            beta=0.1,
            loss_type=loss_type,
            label_smoothing=0.1 if loss_type == "robust" else 0.0,
        )
        return loss

    g = jax.grad(loss_fn)(logits)
    new = jax.nn.log_softmax(logits - 0.5 * g)
    old = jax.nn.log_softmax(logits)
    assert float(new[chosen] - new[rejected]) > float(old[chosen] - old[rejected])


def test_simpo_hand_value() -> None:
    loss, m = simpo_loss(jnp.array([-0.5]), jnp.array([-1.0]), beta=2.0, gamma=0.5)
    assert float(loss) == pytest.approx(sp(-0.5), rel=1e-6)  # z = 2 * 0.5 - 0.5
    assert float(m["rewards/margin"]) == pytest.approx(1.0)


def test_orpo_hand_value() -> None:
    # p_c = 1/2 (odds 1), p_r = 1/4 (odds 1/3): log odds ratio = log 3, log sigmoid = log 3/4
    c, r = jnp.array([math.log(0.5)]), jnp.array([math.log(0.25)])
    loss, m = orpo_loss(c, r, beta=0.1)
    assert float(m["log_odds"]) == pytest.approx(math.log(3.0), rel=1e-5)
    assert float(loss) == pytest.approx(math.log(2.0) - 0.1 * math.log(0.75), rel=1e-5)
    loss2, _ = orpo_loss(c, r, beta=0.1, chosen_nll=jnp.asarray(0.0))
    assert float(loss2) == pytest.approx(-0.1 * math.log(0.75), rel=1e-5)


def test_orpo_stable_near_probability_one() -> None:
    c = jnp.array([-1e-9, -50.0])
    loss, _ = orpo_loss(c, jnp.array([-3.0, -60.0]), beta=0.1)
    g = jax.grad(lambda x: orpo_loss(x, jnp.array([-3.0, -60.0]), beta=0.1)[0])(c)
    assert bool(jnp.isfinite(loss)) and bool(jnp.all(jnp.isfinite(g)))


def test_loss_type_static_under_jit() -> None:
    f = jax.jit(dpo_loss, static_argnames=("loss_type", "beta", "label_smoothing"))
    a, _ = f(PC, PR, RC, RR, beta=0.5, loss_type="ipo")
    b, _ = dpo_loss(PC, PR, RC, RR, beta=0.5, loss_type="ipo")
    assert float(a) == float(b)
