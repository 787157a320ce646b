"""`FlowPolicy`: the flow generator as a `training.policy.Policy`, so Flow-GRPO is GRPO.

Flow-GRPO's MDP: a state is `(x_t, t, condition)`, an action is the next SDE sample
`x_{t+dt}`, and the policy is the step's Gaussian (`algorithms.flow.sde_mean`/`sde_std`).
A rollout of K SDE steps is a "completion" of K "tokens": `sample` returns the per-step
log-probs `[N, K]` from the sampler, and `logps` recomputes them differentiably from the
stored trajectory with one forward pass over all `N*K` states. The shared
`training.grpo.GRPOStep` then applies the group-relative advantages, the clipped ratio
(DAPO clip-higher as an option) and the KL penalty to the reference unchanged; with a
fixed per-step std the k3 KL of the per-pixel-mean log-probs is Flow-GRPO's
`||mean_theta - mean_ref||^2 / (2 std^2)` up to the pixel average.

A prompt is an index into `conditions` (the tag sets being aligned); the rollout adds the
reward columns `images` (final samples in [0, 1], [H, W, 3]) and `groups` (the group id,
which the `flow_diversity` reward uses to measure spread within a group).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from studio_align.algorithms.flow import sde_mean, sde_std, step_entropy, step_logprob
from studio_align.generation.flow_sampler import (
    SDEConfig,
    guided_velocity,
    sample_sde,
    time_grid,
    to_unit,
)
from studio_align.training.policy import Rollout


class FlowPolicy:
    """Sample Flow-GRPO SDE rollouts and score them again (see the module docstring)."""

    def __init__(self, verticals: np.ndarray, tags: np.ndarray, sde: SDEConfig) -> None:
        self.verticals = np.asarray(verticals, np.int32)
        self.tags = np.asarray(tags, np.float32)
        self.sde = sde
        ts = time_grid(sde.steps)
        self._t = jnp.asarray(ts[:-1])
        self._dt = jnp.asarray(ts[1:] - ts[:-1])
        self._groups = 0

    def sample(
        self, model: Any, prompts: Sequence[Any], group_size: int, rng: jax.Array
    ) -> Rollout:
        idx = np.repeat(np.asarray(prompts, np.int64), group_size)
        traj, logps = sample_sde(model, self.verticals[idx], self.tags[idx], self.sde, key=rng)
        n, k = logps.shape
        groups = self._groups + np.arange(n) // group_size
        self._groups += n // group_size
        return Rollout(
            batch={
                "x": traj[:, :-1],
                "x_next": traj[:, 1:],
                "vertical": self.verticals[idx],
                "tags": self.tags[idx],
            },
            old_logps=logps.astype(np.float32),
            mask=np.ones((n, k), bool),
            lengths=np.full((n,), k),
            truncated=np.zeros((n,), bool),
            columns={"images": list(to_unit(traj[:, -1])), "groups": groups.tolist()},
        )

    def logps(
        self, model: Any, batch: Mapping[str, jax.Array]
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        x, x_next = batch["x"], batch["x_next"]
        n, k = x.shape[:2]
        flat = x.reshape((n * k, *x.shape[2:]))
        t = jnp.tile(self._t, n)
        dt = jnp.tile(self._dt, n)
        v = guided_velocity(
            model, flat, t, jnp.repeat(batch["vertical"], k), jnp.repeat(batch["tags"], k, axis=0),
            jnp.float32(self.sde.guidance), guided=self.sde.guidance != 1.0,
        )  # fmt: skip
        kw = {"noise_level": self.sde.noise_level, "t_cap": self.sde.t_cap}
        mean = sde_mean(flat, v, t, dt, **kw)
        std = sde_std(t, dt, **kw)
        lp = step_logprob(x_next.reshape(flat.shape), mean, std).reshape(n, k)
        entropy = step_entropy(std).reshape(n, k)
        return lp, jnp.ones((n, k), bool), entropy
