"""KTO (Ethayarajh et al. 2024): prospect-theoretic loss on unpaired good/bad samples.

Design choices:
- Samples are unpaired: one `[B]` array of policy and reference log-probs plus a boolean
  `desirable[B]`. A mask instead of two ragged arrays keeps shapes static under jit.
- The reference point z0 is the policy/reference KL, estimated per batch and clamped at
  zero, with no gradient (as in the paper). The trainer estimates it on *mismatched*
  pairs (prompt i with completion i+1), passed as `kl_policy_logps` / `kl_ref_logps`;
  when those are omitted the batch's own log-ratios are used, a cruder estimate.
- `kl_reference` fixes z0 instead (e.g. 0.0, which gives the textbook sigmoid form).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array


def kto_kl_estimate(policy_logps: Array, ref_logps: Array) -> Array:
    """z0 = max(0, mean(policy - ref)), detached: KTO's per-batch KL reference point."""
    return jax.lax.stop_gradient(jnp.maximum(jnp.mean(policy_logps - ref_logps), 0.0))


def kto_loss(
    policy_logps: Array,
    ref_logps: Array,
    desirable: Array,
    *,
    kl_policy_logps: Array | None = None,
    kl_ref_logps: Array | None = None,
    kl_reference: float | None = None,
    beta: float = 0.1,
    desirable_weight: float = 1.0,
    undesirable_weight: float = 1.0,
) -> tuple[Array, dict[str, Array]]:
    """KTO loss over `[B]` sequence log-probs with `desirable[B]` labels.

    Per sample with log-ratio `r = policy - ref` and reference point `z0`:
    desirable `w_d * (1 - sigmoid(beta * (r - z0)))`, undesirable
    `w_u * (1 - sigmoid(beta * (z0 - r)))`; the loss is the mean over the batch.
    """
    desirable = desirable.astype(bool)
    logratio = policy_logps - ref_logps
    if kl_reference is not None:
        z0 = jnp.asarray(kl_reference, dtype=logratio.dtype)
    elif kl_policy_logps is not None and kl_ref_logps is not None:
        z0 = kto_kl_estimate(kl_policy_logps, kl_ref_logps)
    else:
        z0 = kto_kl_estimate(policy_logps, ref_logps)
    good = desirable_weight * (1.0 - jax.nn.sigmoid(beta * (logratio - z0)))
    bad = undesirable_weight * (1.0 - jax.nn.sigmoid(beta * (z0 - logratio)))
    losses = jnp.where(desirable, good, bad)
    rewards = jax.lax.stop_gradient(beta * logratio)
    n_good = jnp.sum(desirable)
    n_bad = jnp.sum(~desirable)
    mean_good = jnp.sum(jnp.where(desirable, rewards, 0.0)) / jnp.maximum(n_good, 1)
    mean_bad = jnp.sum(jnp.where(desirable, 0.0, rewards)) / jnp.maximum(n_bad, 1)
    metrics = {
        "kl": z0,
        "rewards/chosen": mean_good,
        "rewards/rejected": mean_bad,
        "rewards/margin": mean_good - mean_bad,
        "desirable_fraction": n_good / desirable.shape[0],
    }
    return jnp.mean(losses), metrics
