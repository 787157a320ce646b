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

Two options of the SDE config (`SDEConfig`):
- `window = W > 0` (Flow-GRPO-Fast): each rollout draws a start among the first half of
  the steps; only the W steps from there are SDE steps, and only they are trained on
  (the batch holds W transitions per sample, not K), so the update costs W/K of the
  default's. The sampling cost is unchanged (K model calls either way).
- `ratio_norm` (GRPO-Guard's observation): a step's log-ratio is
  `eps . dmu / std_t - |dmu|^2 / (2 std_t^2)`, so the same mean shift moves the ratio
  most at the low-noise steps, where clipping then bites first. Scaling each step's
  log-density by `std_t / mean_t std_t` puts the noise term on one scale across steps.
  The step's `old_logps` and `logps` are scaled alike.

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
        std = np.asarray(sde_std(self._t, self._dt, noise_level=sde.noise_level, t_cap=sde.t_cap))
        self._scale = std / std.mean() if sde.ratio_norm else np.ones_like(std)
        self._window = min(sde.window, sde.steps) if sde.window > 0 else sde.steps
        self._groups = 0

    def _trained_steps(self, rng: jax.Array) -> tuple[jax.Array, np.ndarray]:
        """The rollout's key and the steps it trains on: all of them without a window,
        else `window` steps from a random start among the first half (the high-noise
        steps, which explore); the window's draw has its own key."""
        if self._window == self.sde.steps:
            return rng, np.arange(self.sde.steps)
        rng, pick = jax.random.split(rng)
        starts = max(1, self.sde.steps // 2 - self._window + 1)
        start = int(jax.random.randint(pick, (), 0, starts))
        return rng, np.arange(start, start + self._window)

    def sample(
        self, model: Any, prompts: Sequence[Any], group_size: int, rng: jax.Array
    ) -> Rollout:
        idx = np.repeat(np.asarray(prompts, np.int64), group_size)
        rng, steps = self._trained_steps(rng)
        stochastic = np.zeros(self.sde.steps, bool)
        stochastic[steps] = True
        traj, logps = sample_sde(model, self.verticals[idx], self.tags[idx], self.sde, key=rng,
                                 stochastic=stochastic)  # fmt: skip
        n, k = len(idx), len(steps)
        groups = self._groups + np.arange(n) // group_size
        self._groups += n // group_size
        return Rollout(
            batch={
                "x": traj[:, steps],
                "x_next": traj[:, steps + 1],
                "step": np.broadcast_to(steps.astype(np.int32), (n, k)).copy(),
                "vertical": self.verticals[idx],
                "tags": self.tags[idx],
            },
            old_logps=(logps[:, steps] * self._scale[steps]).astype(np.float32),
            mask=np.ones((n, k), bool),
            lengths=np.full((n,), k),
            truncated=np.zeros((n,), bool),
            columns={"images": list(to_unit(traj[:, -1])), "groups": groups.tolist()},
        )

    def logps(
        self, model: Any, batch: Mapping[str, jax.Array]
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        return self.logps_and_features(model, batch)[:3]

    def logps_and_features(
        self, model: Any, batch: Mapping[str, jax.Array]
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        """`logps` plus, per SDE step, what a value head reads (`features`), from the one
        velocity forward; a shared head reads them detached (docs/flow.md, "PPO")."""
        x, x_next, step = batch["x"], batch["x_next"], batch["step"]
        n, k = x.shape[:2]
        flat = x.reshape((n * k, *x.shape[2:]))
        t = self._t[step.reshape(-1)]
        dt = self._dt[step.reshape(-1)]
        v = self._velocity(model, flat, t, batch, k)
        kw = {"noise_level": self.sde.noise_level, "t_cap": self.sde.t_cap}
        mean = sde_mean(flat, v, t, dt, **kw)
        std = sde_std(t, dt, **kw)
        lp = step_logprob(x_next.reshape(flat.shape), mean, std).reshape(n, k)
        lp = lp * jnp.asarray(self._scale)[step]
        entropy = step_entropy(std).reshape(n, k)
        # the value loss does not shape the shared velocity: the policy's per-pixel-mean
        # log-probs have gradients far smaller than a value error's, which would swamp them
        feats = _state_features(flat, jax.lax.stop_gradient(v), t).reshape(n, k, -1)
        return lp, jnp.ones((n, k), bool), entropy, feats

    def features(self, model: Any, batch: Mapping[str, jax.Array]) -> jax.Array:
        """`[N, K, D]` per SDE step: the state `x_t` and the model's velocity there, each
        average-pooled to a 4 x 4 grid per channel, and `t` (PPO's critic input; with a
        separate critic, `model` is the critic's copy of the generator)."""
        x, step = batch["x"], batch["step"]
        n, k = x.shape[:2]
        flat = x.reshape((n * k, *x.shape[2:]))
        t = self._t[step.reshape(-1)]
        return _state_features(flat, self._velocity(model, flat, t, batch, k), t).reshape(n, k, -1)

    def feature_dim(self, model: Any) -> int:
        return 2 * FEATURE_GRID**2 * int(model.cfg.channels) + 1

    def _velocity(
        self, model: Any, flat: jax.Array, t: jax.Array, batch: Mapping[str, jax.Array], k: int
    ) -> jax.Array:
        return guided_velocity(
            model, flat, t, jnp.repeat(batch["vertical"], k), jnp.repeat(batch["tags"], k, axis=0),
            jnp.float32(self.sde.guidance), guided=self.sde.guidance != 1.0,
        )  # fmt: skip


FEATURE_GRID = 4  # a value head sees x_t and v pooled to 4 x 4 cells per channel


def _state_features(x: jax.Array, v: jax.Array, t: jax.Array) -> jax.Array:
    """`[B, 2 * 16 * C + 1]`: `x` and `v` [B, H, W, C] pooled to a 4 x 4 grid, and `t`."""
    b, h, w, c = x.shape
    g = FEATURE_GRID

    def pool(a: jax.Array) -> jax.Array:
        return a.reshape(b, g, h // g, g, w // g, c).mean(axis=(2, 4)).reshape(b, -1)

    return jnp.concatenate([pool(x), pool(v), t[:, None]], axis=1).astype(jnp.float32)
