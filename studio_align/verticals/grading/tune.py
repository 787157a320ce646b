"""GRPO for the grading policy, through the same GRPO core as the router.

One step:
1. sample `batch_sources` source images (with their style requests) and draw
   `group_size` grades each from the current policy (group-contiguous);
2. render every grade and score the outputs with the plugin host's rewards
   (`aesthetic`, `identity`, `clip_critic`, or any registered reward) combined with the
   configured weights by `rewards.score_batch`; columns: `images`, `sources`,
   `requests`, `creators`; context: `aesthetic_model`, `clip_encoder`;
3. `algorithms.grpo.grpo_advantages` over each group, then `updates_per_rollout`
   optimiser steps on `algorithms.grpo.grpo_loss`, with the rollout's log-probs as old
   log-probs and the behaviour-cloned policy as the KL reference. The P grading
   parameters play the role of a completion's tokens ([B, P] log-probs, mask of ones).

Groups whose rewards have zero variance carry no signal; their fraction is logged
(continuous rewards make them rare, so they are not refilled here).
"""

from __future__ import annotations

import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from pydantic import Field

from studio_align.algorithms.grpo import grpo_advantages, grpo_loss
from studio_align.config import Strict
from studio_align.errors import ConfigError
from studio_align.reward_models.color_stats import color_features
from studio_align.rewards import score_batch
from studio_align.verticals.grading.policy import GradingPolicy, request_features
from studio_align.verticals.grading.renderer import render


class GradingTuneConfig(Strict):
    steps: int = Field(60, ge=1)
    batch_sources: int = Field(16, ge=1)
    group_size: int = Field(8, ge=2)
    updates_per_rollout: int = Field(2, ge=1)
    learning_rate: float = Field(1e-3, gt=0)
    epsilon: float = Field(0.2, gt=0)
    epsilon_high: float = Field(0.28, gt=0)
    beta: float = Field(0.02, ge=0)
    kl: str = "k3"
    estimator: str = "grpo"
    weights: dict[str, float] = Field(default_factory=lambda: {"aesthetic": 1.0, "identity": 1.0})
    seed: int = 0


def _update_fn(cfg: GradingTuneConfig) -> Any:
    @nnx.jit
    def update(
        policy: GradingPolicy,
        opt: nnx.Optimizer,
        feats: jax.Array,
        req: jax.Array,
        actions: jax.Array,
        old_logps: jax.Array,
        ref_logps: jax.Array,
        adv: jax.Array,
    ) -> dict[str, jax.Array]:
        def loss_fn(p: GradingPolicy) -> tuple[jax.Array, dict[str, jax.Array]]:
            logps = p.log_probs(feats, req, actions)
            return grpo_loss(
                logps,
                old_logps,
                ref_logps,
                adv,
                jnp.ones_like(logps),
                epsilon=cfg.epsilon,
                epsilon_high=cfg.epsilon_high,
                beta=cfg.beta,
                kl=cfg.kl,
            )

        (loss, metrics), grads = nnx.value_and_grad(loss_fn, has_aux=True)(policy)
        opt.update(policy, grads)
        return {"loss": loss, **metrics}

    return update


def tune_grading(
    policy: GradingPolicy,
    reference: GradingPolicy,
    sources: np.ndarray,
    requests: list[str],
    cfg: GradingTuneConfig,
    *,
    rewards: dict[str, Any],
    context: dict[str, Any] | None = None,
    creator: str | None = None,
    on_step: Any = None,
) -> list[dict[str, float]]:
    """Tune `policy` in place with GRPO on `sources` [N, S, S, 3]; returns per-step metrics.

    `rewards` maps names to `Reward`s (usually `host.rewards`); only those with a weight
    in `cfg.weights` are used.
    """
    missing = sorted(set(cfg.weights) - set(rewards))
    if missing:
        raise ConfigError(
            f"tune.weights: unknown reward(s) {missing}; registered: {sorted(rewards)}"
        )
    use = {k: rewards[k] for k in cfg.weights}
    feats_all = color_features(sources)
    req_all = request_features(list(requests), policy.request_dim)
    opt = nnx.Optimizer(policy, optax.adam(cfg.learning_rate), wrt=nnx.Param)
    update = _update_fn(cfg)
    sample = nnx.jit(lambda p, k, f, r: p.sample(k, f, r, cfg.group_size))
    ref_lp = nnx.jit(lambda p, f, r, a: p.log_probs(f, r, a))
    rng = np.random.default_rng(cfg.seed)
    key = jax.random.key(cfg.seed)
    g, history = cfg.group_size, []
    for step in range(cfg.steps):
        t0 = time.perf_counter()
        idx = rng.choice(len(sources), size=min(cfg.batch_sources, len(sources)), replace=False)
        f, r = jnp.asarray(feats_all[idx]), jnp.asarray(req_all[idx])
        key, sub = jax.random.split(key)
        actions, old_logps = sample(policy, sub, f, r)
        fg, rg = jnp.repeat(f, g, axis=0), jnp.repeat(r, g, axis=0)
        ref_logps = ref_lp(reference, fg, rg, actions)
        src = np.repeat(sources[idx], g, axis=0)
        outs = render(src, np.asarray(actions))
        scores = score_batch(
            use,
            cfg.weights,
            {
                "images": list(outs),
                "sources": list(src),
                "requests": [requests[i] for i in idx for _ in range(g)],
                "creators": [creator] * len(outs),
            },
            context=context or {},
        )
        adv, adv_metrics = grpo_advantages(
            jnp.asarray(scores.total, jnp.float32), g, estimator=cfg.estimator
        )
        for _ in range(cfg.updates_per_rollout):
            m = update(policy, opt, fg, rg, actions, old_logps, ref_logps, adv)
        row = {
            "step": step,
            **{k: float(v) for k, v in scores.metrics.items() if k.endswith("/mean")},
            **{k: float(v) for k, v in adv_metrics.items()},
            **{k: float(v) for k, v in m.items()},
            "std/mean": float(jnp.exp(policy.log_std.value).mean()),
            "seconds": time.perf_counter() - t0,
        }
        history.append(row)
        if on_step is not None:
            on_step(row)
    return history
