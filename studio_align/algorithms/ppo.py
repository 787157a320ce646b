"""PPO with a learned critic: KL-shaped per-token rewards, GAE, the clipped losses.

Design choices:
- Shapes are `[B, T]` over completion "tokens" (LM tokens, or the steps of a flow
  trajectory) with a `mask` of real ones; a row's reward sits on its last real token.
- The KL to the reference is a per-token *reward* penalty, `-coef * (logp - ref)` (k1,
  Ziegler et al. 2019, as TRL's PPOTrainer does), so the critic learns the return of
  the penalised objective; the coefficient comes from `kl_controller` (fixed or
  adaptive) and may be a traced scalar.
- `gae` is a reverse `lax.scan` over time, so it jits and has no Python loop over T;
  the value after a row's last real token is 0 (episodes end with the completion).
- `ppo_loss` = clipped policy surrogate (DAPO clip-higher with `epsilon_high`) +
  `vf_coef` * clipped value loss (`0.5 * max((v - R)^2, (clip(v, v_old +- value_clip)
  - R)^2)`), token-mean over the mask. Pure: no string switches.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array
Metrics = dict[str, Array]


def _masked_mean(x: Array, mask: Array) -> Array:
    return jnp.sum(x * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def shaped_rewards(
    scores: Array, logps: Array, ref_logps: Array | None, mask: Array, *, kl_coef: float | Array
) -> tuple[Array, Metrics]:
    """Per-token rewards `[B, T]`: `-kl_coef * (logp - ref)` on every real token, plus the
    sequence score `[B]` on the last real one. Metrics: the rollout's mean per-sequence
    KL (`kl`, k1 summed over tokens) and the non-score reward."""
    m = mask.astype(jnp.float32)
    last = jnp.maximum(jnp.sum(m, axis=1).astype(jnp.int32) - 1, 0)
    at_last = jax.nn.one_hot(last, m.shape[1], dtype=jnp.float32) * (m.sum(axis=1) > 0)[:, None]
    kl = jnp.zeros_like(m) if ref_logps is None else (logps - ref_logps) * m
    penalty = -kl_coef * kl
    rewards = penalty + scores[:, None] * at_last
    metrics = {
        "kl": jnp.mean(jnp.sum(kl, axis=1)),
        "reward/non_score": jnp.mean(jnp.sum(penalty, axis=1)),
    }
    return rewards, metrics


def gae(
    rewards: Array, values: Array, mask: Array, *, gamma: float = 1.0, lam: float = 0.95
) -> tuple[Array, Array]:
    """Generalised advantage estimation (Schulman et al. 2016) over `[B, T]`.

    `delta_t = r_t + gamma * V_{t+1} - V_t`, `A_t = delta_t + gamma * lam * A_{t+1}`,
    with `V` and `A` after the last real token taken as 0. Returns `(advantages,
    returns = advantages + values)`, both 0 on masked positions."""
    m = mask.astype(jnp.float32)
    r = rewards * m
    v = values * m
    next_v = jnp.concatenate([v[:, 1:], jnp.zeros_like(v[:, :1])], axis=1) * jnp.concatenate(
        [m[:, 1:], jnp.zeros_like(m[:, :1])], axis=1
    )
    deltas = r + gamma * next_v - v

    def back(carry: Array, x: tuple[Array, Array]) -> tuple[Array, Array]:
        delta, keep = x
        adv = (delta + gamma * lam * carry) * keep
        return adv, adv

    _, adv_t = jax.lax.scan(back, jnp.zeros(r.shape[0]), (deltas.T, m.T), reverse=True)
    adv = adv_t.T
    return adv, (adv + v) * m


def whiten(x: Array, mask: Array, *, shift_mean: bool = True, eps: float = 1e-8) -> Array:
    """`(x - mean) / std` over the masked entries (the mean kept if `shift_mean=False`)."""
    m = mask.astype(jnp.float32)
    mean = _masked_mean(x, m)
    var = _masked_mean((x - mean) ** 2, m)
    out = (x - mean) * jax.lax.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return out * m


def ppo_loss(
    logps: Array,
    old_logps: Array,
    advantages: Array,
    values: Array,
    old_values: Array,
    returns: Array,
    mask: Array,
    *,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    value_clip: float = 0.2,
    vf_coef: float = 0.1,
) -> tuple[Array, Metrics]:
    """PPO's clipped surrogate plus the clipped value loss, token-mean over `mask`.

    Metrics: `loss/policy`, `loss/value`, `clip_fraction` (policy), `value_clip_fraction`,
    `ratio/mean`, `kl/old` (k3 to the rollout policy), `value/mean`, `returns/mean` and
    `explained_variance` of the old values for the returns."""
    m = mask.astype(jnp.float32)
    eps_high = epsilon if epsilon_high is None else epsilon_high
    adv = jax.lax.stop_gradient(advantages)
    ratio = jnp.exp(logps - jax.lax.stop_gradient(old_logps))
    clipped = jnp.clip(ratio, 1.0 - epsilon, 1.0 + eps_high)
    pg = -jnp.minimum(ratio * adv, clipped * adv)
    policy_loss = _masked_mean(pg, m)

    ret = jax.lax.stop_gradient(returns)
    v_clipped = old_values + jnp.clip(values - old_values, -value_clip, value_clip)
    vf = 0.5 * jnp.maximum((values - ret) ** 2, (v_clipped - ret) ** 2)
    value_loss = _masked_mean(vf, m)
    loss = policy_loss + vf_coef * value_loss

    r = jax.lax.stop_gradient(ratio)
    d = jax.lax.stop_gradient(old_logps - logps)
    resid = _masked_mean((ret - old_values - _masked_mean(ret - old_values, m)) ** 2, m)
    ret_var = _masked_mean((ret - _masked_mean(ret, m)) ** 2, m)
    metrics = {
        "loss/policy": jax.lax.stop_gradient(policy_loss),
        "loss/value": jax.lax.stop_gradient(value_loss),
        "clip_fraction": _masked_mean(((r < 1.0 - epsilon) | (r > 1.0 + eps_high)) * 1.0, m),
        "value_clip_fraction": _masked_mean(
            (jnp.abs(jax.lax.stop_gradient(values - old_values)) > value_clip) * 1.0, m
        ),
        "ratio/mean": _masked_mean(r, m),
        "kl/old": _masked_mean(jnp.exp(d) - d - 1.0, m),
        "value/mean": _masked_mean(jax.lax.stop_gradient(values), m),
        "returns/mean": _masked_mean(ret, m),
        "explained_variance": 1.0 - resid / jnp.maximum(ret_var, 1e-8),
    }
    return loss, metrics
