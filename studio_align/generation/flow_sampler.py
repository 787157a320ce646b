"""Samplers for the rectified-flow generator: Euler ODE (inference) and Flow-GRPO SDE (RL).

- `ode`: `x <- x + dt v(x, t)` from t = 1 to 0 on a uniform grid of `steps` steps, with
  classifier-free guidance `v = v_null + w (v_cond - v_null)` (one forward of the doubled
  batch) when `guidance != 1`.
- `sde`: the ODE-to-SDE conversion of `algorithms.flow` with `noise_level` and its own
  (typically reduced, e.g. 8-10) step count; returns the whole trajectory and the
  per-step Gaussian log-probabilities of every transition, which are GRPO's old
  log-probs. The final step lands at t = 0 exactly. `stochastic` ([K] bools) makes only
  those steps SDE steps and the others ODE steps (Flow-GRPO-Fast's window); the
  log-probs of the ODE steps are returned but mean nothing.

Design choices (as the LM `Sampler`): one module-level jitted function per mode, with the
model's graph definition static and its state an argument, so new weights never
recompile; the batch is padded to a power of two (`bucket_batch`), and the step count,
the guidance on/off flag and the image shape are the only other static values. Every
trace increments `compile_count`, which tests and `bench/flow.py` read. The whole
integration is one `lax.scan`, so a call is one dispatch.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.algorithms.flow import sde_mean, sde_std, step_logprob

_TRACES = {"count": 0}


def compile_count() -> int:
    """Traces of the flow samplers' jitted functions in this process."""
    return _TRACES["count"]


def bucket_batch(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def time_grid(steps: int) -> np.ndarray:
    """`steps + 1` times from 1 to 0 (uniform)."""
    return np.linspace(1.0, 0.0, steps + 1, dtype=np.float32)


def guided_velocity(
    model: Any, x: jax.Array, t: jax.Array, vertical: jax.Array, tags: jax.Array, w: jax.Array,
    *, guided: bool,
) -> jax.Array:  # fmt: skip
    """`v_null + w (v_cond - v_null)` (one doubled batch), or `v_cond` if not `guided`."""
    if not guided:
        return model(x, t, vertical, tags)
    b = x.shape[0]
    v = model(
        jnp.concatenate([x, x]),
        jnp.concatenate([t, t]),
        jnp.concatenate([vertical, jnp.zeros_like(vertical)]),
        jnp.concatenate([tags, jnp.zeros_like(tags)]),
    )
    return v[b:] + w * (v[:b] - v[b:])


@dataclass(frozen=True)
class SDEConfig:
    """Flow-GRPO rollouts: `steps` SDE steps at `noise_level`, classifier-free `guidance`
    (1 = none: one forward per step). `window > 0` (Flow-GRPO-Fast): only that many
    consecutive steps, starting at a random one of the first half, are stochastic and
    trained on; `ratio_norm` scales each step's log-density by `std_t / mean std` so the
    importance ratio moves on one scale across timesteps (`verticals/flow/policy.py`)."""

    steps: int = 8
    noise_level: float = 0.7
    guidance: float = 1.0
    window: int = 0
    ratio_norm: bool = False

    @property
    def t_cap(self) -> float:
        return float(time_grid(self.steps)[1])


@functools.partial(jax.jit, static_argnames=("graphdef", "guided"))
def _ode(graphdef: Any, state: Any, x: jax.Array, vertical: jax.Array, tags: jax.Array,
         ts: jax.Array, w: jax.Array, *, guided: bool) -> jax.Array:  # fmt: skip
    _TRACES["count"] += 1
    model = nnx.merge(graphdef, state)
    b = x.shape[0]

    def body(x: jax.Array, tt: jax.Array) -> tuple[jax.Array, None]:
        t, t_next = tt[0], tt[1]
        v = guided_velocity(model, x, jnp.full((b,), t), vertical, tags, w, guided=guided)
        return x + (t_next - t) * v, None

    x, _ = jax.lax.scan(body, x, jnp.stack([ts[:-1], ts[1:]], axis=1))
    return x


@functools.partial(jax.jit, static_argnames=("graphdef", "guided", "noise_level", "t_cap"))
def _sde(graphdef: Any, state: Any, x: jax.Array, vertical: jax.Array, tags: jax.Array,
         ts: jax.Array, w: jax.Array, eps: jax.Array, stochastic: jax.Array, *, guided: bool,
         noise_level: float, t_cap: float) -> tuple[jax.Array, jax.Array]:  # fmt: skip
    _TRACES["count"] += 1
    model = nnx.merge(graphdef, state)
    b = x.shape[0]

    def body(x: jax.Array, inp: tuple) -> tuple[jax.Array, tuple]:
        tt, e, sde_step = inp
        t, dt = jnp.full((b,), tt[0]), jnp.full((b,), tt[1] - tt[0])
        v = guided_velocity(model, x, t, vertical, tags, w, guided=guided)
        mean = sde_mean(x, v, t, dt, noise_level=noise_level, t_cap=t_cap)
        std = sde_std(t, dt, noise_level=noise_level, t_cap=t_cap)
        x_next = jnp.where(sde_step, mean + std[:, None, None, None] * e, x + (tt[1] - tt[0]) * v)
        return x_next, (x, step_logprob(x_next, mean, std))

    grid = jnp.stack([ts[:-1], ts[1:]], axis=1)
    x_last, (xs, logps) = jax.lax.scan(body, x, (grid, eps, stochastic))
    traj = jnp.concatenate([xs, x_last[None]], axis=0)  # [K+1, B, ...]
    return traj, logps  # logps [K, B]


def _pad(a: np.ndarray, n: int) -> np.ndarray:
    if a.shape[0] == n:
        return a
    return np.concatenate([a, np.repeat(a[-1:], n - a.shape[0], axis=0)])


def _inputs(model: Any, vertical: Any, tags: Any, noise: np.ndarray | None, seed: int) -> tuple:
    vertical = np.asarray(vertical, np.int32)
    tags = np.asarray(tags, np.float32)
    cfg = model.cfg
    shape = (len(vertical), cfg.image_size, cfg.image_size, cfg.channels)
    if noise is None:
        noise = np.asarray(jax.random.normal(jax.random.key(seed), shape), np.float32)
    return vertical, tags, np.asarray(noise, np.float32)


def sample_ode(
    model: Any, vertical: Any, tags: Any, *, steps: int = 20, guidance: float = 1.0,
    seed: int = 0, noise: np.ndarray | None = None,
) -> np.ndarray:  # fmt: skip
    """Images [N, H, W, C] in model space ([-1, 1]) for conditions `vertical` [N], `tags` [N, V]."""
    vertical, tags, noise = _inputs(model, vertical, tags, noise, seed)
    n = len(vertical)
    nb = bucket_batch(n)
    graphdef, state = nnx.split(model)
    out = _ode(
        graphdef, state, jnp.asarray(_pad(noise, nb)), jnp.asarray(_pad(vertical, nb)),
        jnp.asarray(_pad(tags, nb)), jnp.asarray(time_grid(steps)), jnp.float32(guidance),
        guided=guidance != 1.0,
    )  # fmt: skip
    return np.asarray(out)[:n]


def sample_sde(
    model: Any, vertical: Any, tags: Any, cfg: SDEConfig, *, key: jax.Array,
    stochastic: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Flow-GRPO rollouts: trajectory [N, K+1, H, W, C] and per-step log-probs [N, K];
    `stochastic` [K] (default: all) picks the SDE steps, the others integrate the ODE."""
    sde_steps = np.ones(cfg.steps, bool) if stochastic is None else np.asarray(stochastic, bool)
    vertical = np.asarray(vertical, np.int32)
    tags = np.asarray(tags, np.float32)
    n, mc = len(vertical), model.cfg
    nb = bucket_batch(n)
    k0, k1 = jax.random.split(key)
    shape = (nb, mc.image_size, mc.image_size, mc.channels)
    x1 = jax.random.normal(k0, shape)
    eps = jax.random.normal(k1, (cfg.steps, *shape))
    graphdef, state = nnx.split(model)
    traj, logps = _sde(
        graphdef, state, x1, jnp.asarray(_pad(vertical, nb)), jnp.asarray(_pad(tags, nb)),
        jnp.asarray(time_grid(cfg.steps)), jnp.float32(cfg.guidance), eps,
        jnp.asarray(sde_steps), guided=cfg.guidance != 1.0, noise_level=cfg.noise_level, t_cap=cfg.t_cap,
    )  # fmt: skip
    traj = np.swapaxes(np.asarray(traj), 0, 1)[:n]
    return traj, np.asarray(logps).T[:n]


def to_unit(images: np.ndarray) -> np.ndarray:
    """Model space [-1, 1] -> float [0, 1] (what the colour-stats encoder takes)."""
    return np.clip((np.asarray(images, np.float32) + 1.0) * 0.5, 0.0, 1.0)
