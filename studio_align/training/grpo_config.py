"""GRPO's configuration, the plugin reward adapter and one step's experience.

`GRPOConfig` is the `[grpo]` section (the estimator, clipping, KL, dynamic sampling and
the overlapped-rollout option); how long a run is, its seed and how often it logs are the
shared `[train]` section's, as for every trainer. `plugin_reward_fn` turns the plugin
host's weighted rewards into the step's `reward_fn(records, rollout)`. The step is
`grpo.py`, its rollouts `grpo_rollout.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from studio_align.config import Strict, refuse_moved
from studio_align.rewards import RewardCallConfig, as_rewards
from studio_align.scoring import score_batch

if TYPE_CHECKING:  # the policy module imports JAX; a run config must not
    from studio_align.training.policy import Rollout

RewardFn = Callable[[list[Any], "Rollout"], tuple[np.ndarray, dict[str, float]]]

# keys `[grpo]` once had, now the shared `[train]` section's
MOVED_TO_TRAIN = ("steps", "seed", "log_every")


class GRPOConfig(Strict):
    """`[grpo]`: the algorithm and its rollouts (its steps, seed and logging: `[train]`)."""

    prompts_per_step: int = Field(default=8, ge=1)
    group_size: int = Field(default=8, ge=2)
    mu: int = Field(default=1, ge=1)  # optimisation passes per rollout
    minibatches: int = Field(default=1, ge=1)  # optimizer updates per pass
    estimator: Literal["grpo", "dr_grpo", "rloo"] = "grpo"
    epsilon: float = Field(default=0.2, gt=0)
    epsilon_high: float | None = Field(default=0.28, gt=0)  # DAPO clip-higher; None = epsilon
    beta: float = Field(default=0.0, ge=0)  # KL penalty to the reference (initial, if adaptive)
    # adaptive KL (Ziegler et al. 2019): beta follows the measured KL towards `kl_target`
    # (algorithms.kl_controller.adaptive_kl); None keeps beta fixed
    kl_target: float | None = Field(default=None, gt=0)
    kl_horizon: int = Field(default=10_000, ge=1)
    # standardise the total reward by its running mean/std over all steps before the
    # group advantages (algorithms.reward_norm): rewards on one scale for dr_grpo / rloo
    reward_norm: bool = False
    kl: Literal["k1", "k2", "k3"] = "k3"
    aggregation: Literal["token-mean", "sequence-mean-token-mean", "sequence-mean-token-scale"] = (
        "token-mean"
    )
    importance: Literal["token", "sequence"] = "token"  # "sequence" = GSPO
    dynamic_sampling: bool = True
    max_resample: int = Field(default=4, ge=0)  # extra rollouts per step to refill dropped groups
    overlong_buffer: int = Field(default=0, ge=0)  # tokens; 0 = only truncation is punished
    overlong_penalty: float = Field(default=0.0, ge=0)  # weight of the overlong penalty (0 = off)
    max_tokens: int | None = None  # length limit for the penalty (default: the policy's)
    # overlapped rollout: step n+1's groups are sampled (and scored) in a thread while step
    # n's update runs, from parameters at most `max_staleness` updates old, corrected by
    # `async_correction`. Off by default: at the peer harness's dims it is 1.14x faster
    # (two cores), but on the toy task (bench/grpo_async.py, 3 seeds) its final
    # reward is mixed: better with mu 2 (0.887 vs 0.772), worse with mu 1 (0.475 vs 0.681).
    async_rollout: bool = False
    max_staleness: int = Field(default=1, ge=1)
    # how a stale rollout is corrected: "decoupled" (decoupled PPO: clip against the
    # parameters the step starts from, one extra forward pass; weight by the behaviour
    # ratio) or "clip" (the plain clipped ratio against the rollout's own log-probs)
    async_correction: Literal["decoupled", "clip"] = "decoupled"
    # overlapped rollout on devices of its own (one process): the last `rollout_devices`
    # local devices hold a copy of the policy and the reference, refreshed from the
    # training parameters each time a rollout is requested, and the sampler runs on the
    # first of them; the training mesh (`[mesh]`) takes the remaining devices. 0 = the
    # rollout samples from the training mesh itself.
    rollout_devices: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _split_needs_async(self) -> GRPOConfig:
        if self.rollout_devices and not self.async_rollout:
            raise PydanticCustomError(
                "split_needs_async",
                "rollout_devices = {k} needs async_rollout = true (without the overlap the "
                "update would wait for each rollout on the other devices)",
                {"k": self.rollout_devices},
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        """An old config's `[grpo] steps` (or seed, log_every) names where it lives now."""
        return refuse_moved(data, {k: f"train.{k}" for k in MOVED_TO_TRAIN})


def plugin_reward_fn(
    rewards: Any,
    weights: Mapping[str, float] | None = None,
    *,
    context: Mapping[str, Any] | None = None,
    call: RewardCallConfig | None = None,
) -> RewardFn:
    """A `RewardFn` from plugin rewards (`{name: Reward}` or a list) and config weights.

    Columns are the rollout's (`completions`, decoded `plans`, ...) plus every key of the
    prompt records (dicts) other than `prompt`, repeated per sample; `prompts` are the
    policy inputs. `call` (a run config's `[reward_call]`) bounds each reward call, so a
    hanging plugin stops the run with a `RewardError` naming it (default: 60 s).
    """

    call = call or RewardCallConfig()
    rewards = call.apply(as_rewards(rewards))

    def fn(records: list[Any], rollout: Rollout) -> tuple[np.ndarray, dict[str, float]]:
        columns: dict[str, list[Any]] = dict(rollout.columns)
        columns["prompts"] = [r["prompt"] if isinstance(r, Mapping) else r for r in records]
        if records and isinstance(records[0], Mapping):
            for key in records[0]:
                if key != "prompt":
                    columns[key] = [r[key] for r in records]
        scores = score_batch(rewards, weights, columns, context=context, timeout_s=call.timeout_s)
        return scores.total.astype(np.float32), scores.metrics

    return fn


@dataclass
class Experience:
    """What one GRPO step trains on (device arrays) and the rollout's host metrics."""

    arrays: dict[str, Any]
    n: int
    metrics: dict[str, float]
    zero_std: Any  # device scalar: zero-variance fraction of the kept groups
    version: int  # updates applied to the parameters that sampled it
