"""Preference and RL algorithms as pure functions returning `(loss, metrics)`.

Variants are chosen at the config edge (Python strings resolved before tracing);
stateful helpers follow optax's `(init, update)` convention.
"""

from studio_align.algorithms.bradley_terry import bradley_terry_loss
from studio_align.algorithms.dpo import DPO_LOSSES, dpo_loss, orpo_loss, simpo_loss
from studio_align.algorithms.grpo import (
    AGGREGATIONS,
    ESTIMATORS,
    KL_ESTIMATORS,
    grpo_advantages,
    grpo_loss,
    overlong_penalty,
    zero_variance_groups,
)
from studio_align.algorithms.kl_controller import KLController, KLState, adaptive_kl, fixed_kl
from studio_align.algorithms.kto import kto_kl_estimate, kto_loss
from studio_align.algorithms.reward_norm import NormState, RewardNormalizer, running_normalizer

__all__ = [
    "AGGREGATIONS",
    "DPO_LOSSES",
    "ESTIMATORS",
    "KL_ESTIMATORS",
    "KLController",
    "KLState",
    "NormState",
    "RewardNormalizer",
    "adaptive_kl",
    "bradley_terry_loss",
    "dpo_loss",
    "fixed_kl",
    "grpo_advantages",
    "grpo_loss",
    "kto_kl_estimate",
    "kto_loss",
    "orpo_loss",
    "overlong_penalty",
    "running_normalizer",
    "simpo_loss",
    "zero_variance_groups",
]
