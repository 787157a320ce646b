"""A policy's model with a learned value head: what PPO trains.

`ValueModel` wraps the policy's own `nnx.Module` (kept as `.policy`, the same object, so
the task saves the tuned policy as usual) with a linear `value_head` over the features
the policy exposes (`Policy.features`, e.g. the LM's hidden state before each completion
token).

Design choices:
- `shared`: the head reads the policy's own hidden states, one forward pass for log-probs
  and values, and the value loss shapes the backbone too (scaled by `vf_coef`). Not
  shared: the critic is a separate copy of the starting model (`.critic`), as in TRL's
  PPOTrainer, at twice the forward cost, with no interference between the two losses.
- The head starts at zero, so the first rollout's values are 0 and its advantages the
  plain (discounted) returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx


class ValueModel(nnx.Module):
    """The policy model, an optional critic copy and a value head (module docstring)."""

    def __init__(
        self, policy_model: nnx.Module, features: int, *, shared: bool, rngs: nnx.Rngs
    ) -> None:
        self.policy = policy_model
        self.critic = None if shared else nnx.clone(policy_model)
        self.value_head = nnx.Linear(features, 1, kernel_init=nnx.initializers.zeros, rngs=rngs)


def values_and_logps(
    vm: ValueModel, policy: Any, batch: Mapping[str, jax.Array]
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """`(logps, mask, entropy, values [N, T])` of a rollout batch under `vm`."""
    if vm.critic is None and hasattr(policy, "logps_and_features"):
        lp, mask, entropy, h = policy.logps_and_features(vm.policy, batch)
    else:
        lp, mask, entropy = policy.logps(vm.policy, batch)
        h = policy.features(vm.critic if vm.critic is not None else vm.policy, batch)
    values = vm.value_head(h.astype(jnp.float32))[..., 0]
    return lp, mask, entropy, values


def trainable(wrt: Any) -> Any:
    """The filter of what PPO trains: the policy's own (`wrt`) plus the head and critic."""
    return nnx.Any(
        wrt, nnx.All(nnx.Param, nnx.Any(nnx.PathContains("value_head"), nnx.PathContains("critic")))
    )
