"""GRPO family: group-relative advantages and the clipped policy-gradient loss.

Design choices:
- Rollouts are laid out group-contiguous: the G completions of prompt p occupy rows
  `p*G .. p*G+G-1`. Advantages are computed per group of that layout.
- Estimators (`grpo`, `dr_grpo`, `rloo`), KL estimators (`k1`, `k2`, `k3`),
  aggregations and the importance level (token or GSPO sequence) are Python-level
  choices: each is its own small function picked from a dict before tracing. Jitted
  callers pass them as static arguments; no string is compared inside a traced graph.
- `epsilon_high` > `epsilon` is DAPO's clip-higher (asymmetric trust region that keeps
  low-probability tokens explorable). GSPO uses a sequence-level ratio, the exponent of
  the length-normalised log-ratio, and typically far smaller epsilons (3e-4 / 4e-4).
- KL to the reference is a per-token penalty added to the loss (not to the reward), with
  k3 = exp(d) - d - 1, d = ref - logp, as default: unbiased, non-negative, and its
  gradient is that of a proper KL; k1 as a loss has zero expected gradient on-policy.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

Array = jax.Array
Metrics = dict[str, Array]


# --- advantages ---------------------------------------------------------------------------


def _grouped(rewards: Array, group_size: int) -> Array:
    if rewards.ndim != 1 or rewards.shape[0] % group_size:
        raise ValueError(
            f"rewards must be 1-D with a multiple of group_size={group_size} entries, "
            f"got shape {rewards.shape}"
        )
    if group_size < 2:
        raise ValueError(f"group-relative advantages need group_size >= 2, got {group_size}")
    return rewards.reshape(-1, group_size)


def _grpo(g: Array, eps: float) -> Array:
    mean = g.mean(axis=1, keepdims=True)
    std = g.std(axis=1, ddof=1, keepdims=True)
    return (g - mean) / (std + eps)


def _dr_grpo(g: Array, eps: float) -> Array:
    del eps
    return g - g.mean(axis=1, keepdims=True)


def _rloo(g: Array, eps: float) -> Array:
    del eps
    n = g.shape[1]
    leave_one_out = (g.sum(axis=1, keepdims=True) - g) / (n - 1)
    return g - leave_one_out


ESTIMATORS: dict[str, Callable[[Array, float], Array]] = {
    "grpo": _grpo,
    "dr_grpo": _dr_grpo,
    "rloo": _rloo,
}


def grpo_advantages(
    rewards: Array, group_size: int, *, estimator: str = "grpo", eps: float = 1e-4
) -> tuple[Array, Metrics]:
    """Group-relative advantages for `[P*G]` group-contiguous rewards.

    `grpo`: (r - mean) / (std + eps) with the unbiased (ddof=1) group std;
    `dr_grpo`: r - mean (Dr. GRPO drops the std normalisation);
    `rloo`: r - mean of the other G-1 rewards of the group.
    Metrics: reward mean/std and `zero_std_fraction` (groups whose rewards are all equal,
    which carry no learning signal).
    """
    try:
        fn = ESTIMATORS[estimator]
    except KeyError:
        raise ValueError(
            f"unknown advantage estimator {estimator!r}; expected one of {sorted(ESTIMATORS)}"
        ) from None
    g = _grouped(jnp.asarray(rewards, jnp.float32), group_size)
    adv = fn(g, eps).reshape(-1)
    spread = g.max(axis=1) - g.min(axis=1)
    metrics = {
        "reward/mean": g.mean(),
        "reward/std": g.std(),
        "zero_std_fraction": jnp.mean((spread == 0).astype(jnp.float32)),
    }
    return adv, metrics


def zero_variance_groups(rewards: Array, group_size: int) -> Array:
    """Boolean `[P]`: True for groups whose rewards are all equal (dropped by dynamic sampling)."""
    g = _grouped(jnp.asarray(rewards), group_size)
    return g.max(axis=1) == g.min(axis=1)


# --- KL estimators (per token, policy vs reference) --------------------------------------


def _k1(logps: Array, ref_logps: Array) -> Array:
    return logps - ref_logps


def _k2(logps: Array, ref_logps: Array) -> Array:
    return 0.5 * (logps - ref_logps) ** 2


def _k3(logps: Array, ref_logps: Array) -> Array:
    d = ref_logps - logps
    return jnp.exp(d) - d - 1.0


KL_ESTIMATORS: dict[str, Callable[[Array, Array], Array]] = {"k1": _k1, "k2": _k2, "k3": _k3}


# --- aggregation of per-token losses ------------------------------------------------------


def _token_mean(x: Array, mask: Array, max_tokens: int | None) -> Array:
    del max_tokens
    return jnp.sum(x * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def _seq_mean_token_mean(x: Array, mask: Array, max_tokens: int | None) -> Array:
    del max_tokens
    per_seq = jnp.sum(x * mask, axis=1) / jnp.maximum(jnp.sum(mask, axis=1), 1.0)
    return jnp.mean(per_seq)


def _seq_mean_token_scale(x: Array, mask: Array, max_tokens: int | None) -> Array:
    # Dr. GRPO: a constant normaliser (B * max_tokens) removes the length bias.
    scale = x.shape[1] if max_tokens is None else max_tokens
    return jnp.sum(x * mask) / (x.shape[0] * scale)


AGGREGATIONS: dict[str, Callable[[Array, Array, int | None], Array]] = {
    "token-mean": _token_mean,
    "sequence-mean-token-mean": _seq_mean_token_mean,
    "sequence-mean-token-scale": _seq_mean_token_scale,
}


# --- importance ratios ---------------------------------------------------------------------


def _token_log_ratio(logps: Array, old_logps: Array, mask: Array) -> Array:
    del mask
    return logps - old_logps


def _sequence_log_ratio(logps: Array, old_logps: Array, mask: Array) -> Array:
    # GSPO: one ratio per sequence, exp of the length-normalised log-ratio, on every token.
    lr = jnp.sum((logps - old_logps) * mask, axis=1) / jnp.maximum(jnp.sum(mask, axis=1), 1.0)
    return jnp.broadcast_to(lr[:, None], logps.shape)


IMPORTANCE: dict[str, Callable[[Array, Array, Array], Array]] = {
    "token": _token_log_ratio,
    "sequence": _sequence_log_ratio,
}


def _pick(table: dict, key: str, what: str):  # type: ignore[no-untyped-def]
    try:
        return table[key]
    except KeyError:
        raise ValueError(f"unknown {what} {key!r}; expected one of {sorted(table)}") from None


def grpo_loss(
    logps: Array,
    old_logps: Array,
    ref_logps: Array | None,
    advantages: Array,
    mask: Array,
    *,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    beta: float | Array = 0.0,
    kl: str = "k3",
    aggregation: str = "sequence-mean-token-mean",
    importance: str = "token",
    max_tokens: int | None = None,
    prox_logps: Array | None = None,
    max_is_weight: float = 5.0,
) -> tuple[Array, Metrics]:
    """Clipped surrogate loss over `[B, T]` per-token log-probs of completions.

    `advantages` is `[B]` (one per sequence) or `[B, T]`. `old_logps` are the rollout's
    log-probs (equal to `logps` on the first update, where the ratio is 1).
    `epsilon_high` defaults to `epsilon`; larger gives DAPO's clip-higher.
    `beta` > 0 adds `beta * KL(kl estimator)` per token against `ref_logps`; it may be a
    traced scalar (an adaptive KL controller's coefficient), which needs `ref_logps`.
    `importance="sequence"` is GSPO. `aggregation` is one of `token-mean`,
    `sequence-mean-token-mean` (GRPO paper), `sequence-mean-token-scale` (Dr. GRPO,
    normaliser `B * max_tokens`, default T).
    `prox_logps` (decoupled PPO, Hilton et al. 2021, for stale rollouts): the log-probs of
    the parameters the update starts from. The ratio is then clipped against them, not
    against the rollout's policy, and each token is weighted by the behaviour correction
    `exp(prox - old)` (no gradient, capped at `max_is_weight`). With a rollout one update
    old, clipping against the rollout's policy zeroes the gradient of every token the
    last update already moved past the clip range; clipping against the proximal policy
    keeps the trust region where it belongs, and the weight keeps the estimate unbiased.
    Metrics: `loss/policy`, `kl` (to the reference, when given), `kl/old` (to the rollout
    policy), `clip_fraction` (+ `/low`, `/high`), `ratio/mean`, with `prox_logps` also
    `is_weight/mean`.
    """
    agg = _pick(AGGREGATIONS, aggregation, "aggregation")
    log_ratio_fn = _pick(IMPORTANCE, importance, "importance level")
    kl_fn = _pick(KL_ESTIMATORS, kl, "KL estimator")
    eps_high = epsilon if epsilon_high is None else epsilon_high
    mask = mask.astype(logps.dtype)
    adv = advantages[:, None] if advantages.ndim == 1 else advantages

    metrics: Metrics = {}
    anchor = old_logps if prox_logps is None else prox_logps
    ratio = jnp.exp(log_ratio_fn(logps, jax.lax.stop_gradient(anchor), mask))
    clipped = jnp.clip(ratio, 1.0 - epsilon, 1.0 + eps_high)
    per_token = -jnp.minimum(ratio * adv, clipped * adv)
    if prox_logps is not None:
        behaviour = jnp.exp(log_ratio_fn(prox_logps, old_logps, mask))
        weight = jax.lax.stop_gradient(jnp.minimum(behaviour, max_is_weight))
        per_token = weight * per_token
        metrics["is_weight/mean"] = _token_mean(weight, mask, None)
    policy_loss = agg(per_token, mask, max_tokens)

    if not (isinstance(beta, int | float) and beta == 0.0):
        if ref_logps is None:
            raise ValueError("grpo_loss: beta != 0 needs ref_logps")
        token_kl = kl_fn(logps, jax.lax.stop_gradient(ref_logps))
        loss = agg(per_token + beta * token_kl, mask, max_tokens)
        metrics["kl"] = jax.lax.stop_gradient(_token_mean(token_kl, mask, None))
    else:
        loss = policy_loss
        if ref_logps is not None:
            token_kl = kl_fn(logps, ref_logps)
            metrics["kl"] = jax.lax.stop_gradient(_token_mean(token_kl, mask, None))

    r = jax.lax.stop_gradient(ratio)
    low = ((r < 1.0 - epsilon) & (adv < 0)).astype(logps.dtype)
    high = ((r > 1.0 + eps_high) & (adv > 0)).astype(logps.dtype)
    metrics["loss/policy"] = jax.lax.stop_gradient(policy_loss)
    metrics["clip_fraction/low"] = _token_mean(low, mask, None)
    metrics["clip_fraction/high"] = _token_mean(high, mask, None)
    metrics["clip_fraction"] = metrics["clip_fraction/low"] + metrics["clip_fraction/high"]
    metrics["ratio/mean"] = _token_mean(r, mask, None)
    # how far the updates have moved from the rollout policy (k3, no gradient)
    metrics["kl/old"] = _token_mean(_k3(jax.lax.stop_gradient(logps), old_logps), mask, None)
    return loss, metrics


# --- reward shaping ------------------------------------------------------------------------


def overlong_penalty(lengths: jax.typing.ArrayLike, *, max_tokens: int, buffer: int) -> Array:
    """DAPO's soft overlong punishment, counted in tokens, in [-1, 0].

    0 up to `max_tokens - buffer`, then falling linearly to -1 at `max_tokens`, and -1
    beyond (a truncated completion). `buffer = 0` gives 0 up to `max_tokens`, -1 beyond.
    """
    lengths = jnp.asarray(lengths, jnp.float32)
    start = max_tokens - buffer
    ramp = (start - lengths) / max(buffer, 1)
    return jnp.where(lengths <= start, 0.0, jnp.where(lengths <= max_tokens, ramp, -1.0))
