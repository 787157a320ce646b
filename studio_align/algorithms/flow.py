"""Rectified flow: the pretraining loss, Diffusion-DPO, and Flow-GRPO's SDE step densities.

Convention (SD3, Flow-GRPO): `x_t = (1 - t) x0 + t noise`, t = 1 is noise, t = 0 data;
the model predicts the velocity `v = noise - x0`, and sampling integrates from t = 1 to
t = 0 with negative steps `dt`.

Design choices:
- Pure functions of arrays returning `(loss, metrics)`; the trainers own the model calls,
  so the same loss serves pretraining, DPO and tests with hand-computed numbers.
- Diffusion-DPO (Wallace et al., 2023) in its flow form: per-sample squared velocity
  errors of the policy and the frozen reference on the chosen (w) and rejected (l)
  image, both noised with the *same* t and noise, then
  `-log sigmoid(-beta/2 * ((e_w - e_l) - (e_ref_w - e_ref_l)))`. Errors are means over
  pixels (as in the reference implementation), so `beta` is in the thousands.
- Flow-GRPO (Liu et al., 2025) turns the ODE `dx = v dt` into an SDE with the same
  marginals: `x' = x + [v + s_t^2 / (2t) (x + (1 - t) v)] dt + s_t sqrt(-dt) eps`, with
  `s_t = a sqrt(t / (1 - t))` (`a` = `noise_level`; t is capped at `t_cap` < 1 so the
  first step from pure noise is finite). Each step is Gaussian, so its log-density is
  exact; `step_logprob` averages it over pixels (Flow-GRPO's choice: the clipped ratio
  then lives on a per-pixel scale and one step's ratio is not exp(thousands)).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

Array = jax.Array
Metrics = dict[str, Array]


def interpolate(x0: Array, noise: Array, t: Array) -> Array:
    """The straight path `(1 - t) x0 + t noise` for per-sample times `t` [B]."""
    tb = t.reshape((-1,) + (1,) * (x0.ndim - 1))
    return (1.0 - tb) * x0 + tb * noise


def velocity_error(v_pred: Array, x0: Array, noise: Array) -> Array:
    """Per-sample mean squared error [B] of a velocity against the target `noise - x0`."""
    return jnp.mean((v_pred - (noise - x0)) ** 2, axis=tuple(range(1, v_pred.ndim)))


def rectified_flow_loss(v_pred: Array, x0: Array, noise: Array) -> tuple[Array, Metrics]:
    """Conditional flow-matching loss: mean squared velocity error."""
    err = velocity_error(v_pred, x0, noise)
    loss = err.mean()
    return loss, {"loss": loss}


def diffusion_dpo_loss(
    err_w: Array, err_l: Array, ref_err_w: Array, ref_err_l: Array, *, beta: float = 2000.0
) -> tuple[Array, Metrics]:
    """Diffusion-DPO on per-sample velocity errors [B] (see the module docstring).

    Metrics: `loss`, `accuracy` (implicit reward ranks chosen above rejected),
    `margin` (the sigmoid's argument), `diff/policy` and `diff/reference` (e_w - e_l).
    """
    model_diff = err_w - err_l
    ref_diff = ref_err_w - ref_err_l
    inside = -0.5 * beta * (model_diff - ref_diff)
    loss = -jax.nn.log_sigmoid(inside).mean()
    return loss, {
        "loss": loss,
        "accuracy": (inside > 0).astype(jnp.float32).mean(),
        "margin": inside.mean(),
        "diff/policy": model_diff.mean(),
        "diff/reference": ref_diff.mean(),
    }


def velocity_anchor(v: Array, v_ref: Array) -> Array:
    """Per-sample mean squared difference [B] between two models' velocities on the same
    noisy input. For an SDE step of variance s^2 dt both models share, the KL between
    their transitions is `||drift difference||^2 dt / (2 s^2)`, so this is the per-pixel KL
    to the reference up to a time-dependent factor: Diffusion-DPO's sigmoid only ranks
    e_w - e_l, and the anchor is what keeps both errors near the reference's."""
    return jnp.mean((v - v_ref) ** 2, axis=tuple(range(1, v.ndim)))


def sde_std(t: Array, dt: Array, *, noise_level: float, t_cap: float) -> Array:
    """Std of one SDE step from t with step dt < 0: `a sqrt(t/(1-t)) sqrt(-dt)`."""
    tc = jnp.minimum(t, t_cap)
    return noise_level * jnp.sqrt(tc / (1.0 - tc)) * jnp.sqrt(-dt)


def sde_mean(x: Array, v: Array, t: Array, dt: Array, *, noise_level: float, t_cap: float) -> Array:
    """Mean of one Flow-GRPO SDE step (drift of the ODE plus the score correction).

    `t` and `dt` are per-sample [B] (or scalars); `x`, `v` are [B, ...].
    """
    shape = (-1,) + (1,) * (x.ndim - 1)
    t_b = jnp.broadcast_to(t, x.shape[:1]).reshape(shape)
    dt_b = jnp.broadcast_to(dt, x.shape[:1]).reshape(shape)
    tc = jnp.minimum(t_b, t_cap)
    s2 = noise_level**2 * tc / (1.0 - tc)  # s_t^2
    return x + (v + s2 / (2.0 * t_b) * (x + (1.0 - t_b) * v)) * dt_b


def gaussian_logpdf(x: Array, mean: Array, std: Array) -> Array:
    """Elementwise log N(x; mean, std^2); `std` broadcasts from [B] over the rest."""
    s = std.reshape(std.shape + (1,) * (x.ndim - std.ndim))
    z = (x - mean) / s
    return -0.5 * z * z - jnp.log(s) - 0.5 * math.log(2.0 * math.pi)


def step_logprob(x_next: Array, mean: Array, std: Array) -> Array:
    """Per-sample [B] log-density of one SDE step, averaged over pixels (Flow-GRPO)."""
    lp = gaussian_logpdf(x_next, mean, std)
    return jnp.mean(lp, axis=tuple(range(1, lp.ndim)))


def step_entropy(std: Array) -> Array:
    """Per-pixel differential entropy of the step Gaussian, 0.5 log(2 pi e std^2)."""
    return 0.5 * math.log(2.0 * math.pi * math.e) + jnp.log(std)
