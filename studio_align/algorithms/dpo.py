"""DPO-family preference losses: DPO (sigmoid / cDPO, IPO, hinge, robust), SimPO, ORPO.

Design choices:
- Pure functions of per-sequence log-probabilities; the caller decides how those are
  reduced over tokens (summed for DPO, length-averaged for IPO, SimPO and ORPO, as in
  their papers). Nothing here touches a model.
- The variant (`loss_type`) is a Python-level choice resolved before any tracing: each
  variant is its own function of the margin, picked from a dict. Jitted callers pass
  `loss_type` as a static argument, so no string switch is ever traced.
- Every function returns `(loss, metrics)`; metrics are scalars (implicit rewards,
  margin, preference accuracy) ready for logging.

Notation: the DPO "logit" is `h = (pi_c - pi_r) - (ref_c - ref_r)`, the difference of
the policy's and the reference's log-ratio of chosen over rejected.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

Array = jax.Array
Metrics = dict[str, Array]


def _sigmoid(h: Array, *, beta: float, label_smoothing: float) -> Array:
    # Conservative DPO: the label is flipped with probability `label_smoothing`.
    return -(1.0 - label_smoothing) * jax.nn.log_sigmoid(
        beta * h
    ) - label_smoothing * jax.nn.log_sigmoid(-beta * h)


def _robust(h: Array, *, beta: float, label_smoothing: float) -> Array:
    # Robust DPO (Chowdhury et al. 2024): unbiased under label noise rate `label_smoothing`.
    if not 0.0 <= label_smoothing < 0.5:
        raise ValueError(f"robust DPO needs 0 <= label_smoothing < 0.5, got {label_smoothing}")
    return (
        -(1.0 - label_smoothing) * jax.nn.log_sigmoid(beta * h)
        + label_smoothing * jax.nn.log_sigmoid(-beta * h)
    ) / (1.0 - 2.0 * label_smoothing)


def _hinge(h: Array, *, beta: float, label_smoothing: float) -> Array:
    # SLiC-style hinge on the scaled margin.
    del label_smoothing
    return jax.nn.relu(1.0 - beta * h)


def _ipo(h: Array, *, beta: float, label_smoothing: float) -> Array:
    # IPO (Azar et al. 2023): regress the margin to 1 / (2 beta); beta acts as tau.
    del label_smoothing
    return (h - 1.0 / (2.0 * beta)) ** 2


DPO_LOSSES: dict[str, Callable[..., Array]] = {
    "sigmoid": _sigmoid,
    "robust": _robust,
    "hinge": _hinge,
    "ipo": _ipo,
}


def dpo_loss(
    policy_chosen_logps: Array,
    policy_rejected_logps: Array,
    ref_chosen_logps: Array,
    ref_rejected_logps: Array,
    *,
    beta: float = 0.1,
    loss_type: str = "sigmoid",
    label_smoothing: float = 0.0,
) -> tuple[Array, Metrics]:
    """Direct Preference Optimisation over a batch of `[B]` sequence log-probs.

    `loss_type` is one of `sigmoid` (with `label_smoothing` > 0 this is conservative
    DPO), `robust`, `hinge`, `ipo`. Returns the batch-mean loss and metrics:
    `rewards/chosen`, `rewards/rejected` (implicit rewards beta * log-ratio to the
    reference), `rewards/margin` and `rewards/accuracy` (fraction with chosen > rejected).
    """
    try:
        per_pair = DPO_LOSSES[loss_type]
    except KeyError:
        raise ValueError(
            f"unknown DPO loss_type {loss_type!r}; expected one of {sorted(DPO_LOSSES)}"
        ) from None
    chosen_logratio = policy_chosen_logps - ref_chosen_logps
    rejected_logratio = policy_rejected_logps - ref_rejected_logps
    h = chosen_logratio - rejected_logratio
    losses = per_pair(h, beta=beta, label_smoothing=label_smoothing)
    chosen_rewards = jax.lax.stop_gradient(beta * chosen_logratio)
    rejected_rewards = jax.lax.stop_gradient(beta * rejected_logratio)
    return jnp.mean(losses), _reward_metrics(chosen_rewards, rejected_rewards)


def simpo_loss(
    policy_chosen_logps: Array,
    policy_rejected_logps: Array,
    *,
    beta: float = 2.0,
    gamma: float = 0.5,
    label_smoothing: float = 0.0,
) -> tuple[Array, Metrics]:
    """SimPO (Meng et al. 2024): reference-free, margin `gamma` on length-averaged log-probs.

    `policy_*_logps` must be the per-token MEAN log-probs of each sequence. Loss per pair:
    `-log sigmoid(beta * (c - r) - gamma)` (label smoothing as in cDPO).
    """
    z = beta * (policy_chosen_logps - policy_rejected_logps) - gamma
    losses = -(1.0 - label_smoothing) * jax.nn.log_sigmoid(
        z
    ) - label_smoothing * jax.nn.log_sigmoid(-z)
    chosen_rewards = jax.lax.stop_gradient(beta * policy_chosen_logps)
    rejected_rewards = jax.lax.stop_gradient(beta * policy_rejected_logps)
    return jnp.mean(losses), _reward_metrics(chosen_rewards, rejected_rewards)


def _log1mexp(x: Array) -> Array:
    """log(1 - exp(x)) for x < 0, stable on both sides of -log 2."""
    x = jnp.minimum(x, -1e-7)
    return jnp.where(x > -0.6931471805599453, jnp.log(-jnp.expm1(x)), jnp.log1p(-jnp.exp(x)))


def orpo_loss(
    policy_chosen_logps: Array,
    policy_rejected_logps: Array,
    *,
    beta: float = 0.1,
    chosen_nll: Array | None = None,
) -> tuple[Array, Metrics]:
    """ORPO (Hong et al. 2024): SFT on the chosen plus `beta` times an odds-ratio term.

    `policy_*_logps` are per-token MEAN log-probs (so exp() is a per-token probability).
    `chosen_nll` is the SFT loss on the chosen completions; by default the mean of
    `-policy_chosen_logps`. Loss: `nll - beta * mean(log sigmoid(log odds_c - log odds_r))`.
    """
    log_odds = (policy_chosen_logps - policy_rejected_logps) - (
        _log1mexp(policy_chosen_logps) - _log1mexp(policy_rejected_logps)
    )
    ratio = jax.nn.log_sigmoid(log_odds)
    nll = -jnp.mean(policy_chosen_logps) if chosen_nll is None else chosen_nll
    loss = nll - beta * jnp.mean(ratio)
    metrics = _reward_metrics(
        jax.lax.stop_gradient(beta * policy_chosen_logps),
        jax.lax.stop_gradient(beta * policy_rejected_logps),
    )
    metrics["nll"] = jax.lax.stop_gradient(nll)
    metrics["log_odds_ratio"] = jax.lax.stop_gradient(jnp.mean(ratio))
    metrics["log_odds"] = jax.lax.stop_gradient(jnp.mean(log_odds))
    return loss, metrics


def _reward_metrics(chosen: Array, rejected: Array) -> Metrics:
    return {
        "rewards/chosen": jnp.mean(chosen),
        "rewards/rejected": jnp.mean(rejected),
        "rewards/margin": jnp.mean(chosen - rejected),
        "rewards/accuracy": jnp.mean((chosen > rejected).astype(jnp.float32)),
    }
