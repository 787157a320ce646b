"""GRPO's batch source: prompts, rollouts with dynamic sampling, rewards, advantages and
reference log-probs, produced synchronously or on a worker thread.

`Rollouts.next(step, ...)` hands `grpo.GRPOStep` the experience of one step, sampled
from the parameters current when it was requested. Unlike a supervised batch source it
depends on the policy being trained, so it keeps its own state, all of it saved with each
checkpoint (`record`) for an exact resume: the sampling key, the prompt order and its
queue, and the running reward normaliser.

Design choices:
- Prompts are drawn without replacement in shuffled passes (numpy's generator, seeded
  by the run's seed); sampling keys are split from one JAX key per rollout.
- Dynamic sampling (DAPO) drops zero-variance groups and draws fresh prompts until the
  step is full (at most `max_resample` extra rollouts, then filled with dropped groups,
  whose advantages are 0). Host-side Python: data-dependent and cheap next to the
  forward passes.
- Overlapped rollout (`async_rollout`): one worker thread produces the next
  `max_staleness` steps' experience while the main thread runs the update; the sampling
  state recorded for step n is the one from before step n's rollout was requested, so a
  resumed run redraws that rollout, on-policy.
- Split devices (`rollout_devices`): the worker samples and scores the reference on a
  device of its own. Each request copies the current parameters there (`jax.device_put`,
  gathered from the training mesh): the weights are synced once per step, and the
  sampler never competes with the update for the training devices.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.algorithms import grpo_advantages, overlong_penalty
from studio_align.algorithms.reward_norm import NormState, RewardNormalizer, running_normalizer
from studio_align.training.grpo_config import Experience, GRPOConfig, RewardFn
from studio_align.training.policy import Policy, Rollout

Scorer = Callable[[nnx.Module, Mapping[str, jax.Array]], tuple[jax.Array, ...]]


def scorer(policy: Policy, group_size: int, *, grouped: bool) -> Scorer:
    """`policy.logps`, or its grouped form (each prompt scored once for its G samples)
    when the policy offers one and the rows arrive as whole, contiguous groups."""
    if grouped and hasattr(policy, "grouped_logps"):
        return lambda model, batch: policy.grouped_logps(model, batch, group_size)
    return policy.logps


class Rollouts:
    """One GRPO step's experience at a time, from `prompts` (see the module docstring)."""

    def __init__(
        self,
        policy: Policy,
        prompts: Sequence[Any],
        reward_fn: RewardFn,
        cfg: GRPOConfig,
        *,
        seed: int,
        ref_model: nnx.Module | None = None,
        device: jax.Device | None = None,
    ):
        self.policy, self.reward_fn, self.cfg = policy, reward_fn, cfg
        self.device = device  # where the rollout runs; None: the training mesh
        self.prompts = list(prompts)
        self.rng: jax.Array = jax.random.key(seed)
        self._order = np.random.default_rng(seed)
        self._queue: list[int] = []
        self.reward_norm: RewardNormalizer | None = (
            running_normalizer() if cfg.reward_norm else None
        )
        self.norm_state: NormState | None = (
            self.reward_norm.init() if self.reward_norm is not None else None
        )
        self._pool: ThreadPoolExecutor | None = None
        self._pending: deque[Future[Experience]] = deque()
        self._record_at: dict[int, dict[str, Any]] = {}  # async: sampling state per step
        self._ref: Callable[[Mapping[str, jax.Array]], jax.Array] | None = None
        if ref_model is not None:
            whole = scorer(policy, cfg.group_size, grouped=True)  # a rollout keeps its groups
            ref_graphdef, ref_state = nnx.split(ref_model)
            if device is not None:
                ref_state = jax.device_put(ref_state, device)
            ref_fn = jax.jit(lambda st, b: whole(nnx.merge(ref_graphdef, st), b)[0])
            self._ref = lambda b: ref_fn(ref_state, b)

    # -- one rollout -------------------------------------------------------------------------

    def _next_prompts(self, n: int) -> list[Any]:
        out: list[Any] = []
        while len(out) < n:
            if not self._queue:
                self._queue = list(self._order.permutation(len(self.prompts)))
            out.append(self.prompts[self._queue.pop()])
        return out

    def _rollout(
        self, records: list[Any], model: nnx.Module
    ) -> tuple[Rollout, np.ndarray, dict[str, float]]:
        cfg, g = self.cfg, self.cfg.group_size
        self.rng, key = jax.random.split(self.rng)
        inputs = [r["prompt"] if isinstance(r, Mapping) else r for r in records]
        rollout = self.policy.sample(model, inputs, g, key)
        per_sample = [r for r in records for _ in range(g)]
        rewards, metrics = self.reward_fn(per_sample, rollout)
        rewards = np.asarray(rewards, np.float32)
        if cfg.overlong_penalty > 0:
            limit = cfg.max_tokens or rollout.mask.shape[1]
            lengths = np.where(rollout.truncated, limit + 1, rollout.lengths)
            pen = np.asarray(
                overlong_penalty(lengths, max_tokens=limit, buffer=cfg.overlong_buffer)
            )
            rewards = rewards + cfg.overlong_penalty * pen
            metrics = {**metrics, "reward/overlong/mean": float(pen.mean())}
        metrics = {**metrics, "reward/total/mean": float(rewards.mean())}
        return rollout, rewards, metrics

    def collect(self, model: nnx.Module) -> tuple[Rollout, np.ndarray, dict[str, float]]:
        """One step's rollout from `model` after dynamic sampling: `prompts_per_step` groups."""
        cfg, g, p = self.cfg, self.cfg.group_size, self.cfg.prompts_per_step
        rollout, rewards, metrics = self._rollout(self._next_prompts(p), model)
        groups = rewards.reshape(-1, g)
        flat = groups.max(1) == groups.min(1)
        metrics = {**metrics, "zero_std_fraction": float(flat.mean()), "rollouts": 1.0}
        if not cfg.dynamic_sampling:
            return rollout, rewards, metrics
        keep_r: list[Rollout] = []
        spare_r: list[Rollout] = []
        keep_w: list[np.ndarray] = []
        spare_w: list[np.ndarray] = []

        def split(r: Rollout, w: np.ndarray) -> None:
            gw = w.reshape(-1, g)
            ok = gw.max(1) > gw.min(1)
            for i in range(len(ok)):
                rows = np.arange(i * g, (i + 1) * g)
                (keep_r if ok[i] else spare_r).append(r.select(rows))
                (keep_w if ok[i] else spare_w).append(w[rows])

        split(rollout, rewards)
        extra = 0
        while len(keep_r) < p and extra < cfg.max_resample:
            r2, w2, _ = self._rollout(self._next_prompts(p), model)
            split(r2, w2)
            extra += 1
        filled = max(0, p - len(keep_r))
        metrics["rollouts"] = 1.0 + extra
        metrics["dynamic_sampling/filled"] = float(filled) / p
        return (
            Rollout.concat((keep_r + spare_r)[:p]),
            np.concatenate((keep_w + spare_w)[:p]),
            metrics,
        )

    def reference_logps(self, batch: Mapping[str, jax.Array]) -> jax.Array:
        """The reference model's log-probs of a rollout's rows (jitted)."""
        assert self._ref is not None
        return self._ref(batch)

    def experience(self, model: nnx.Module, version: int) -> Experience:
        """Rollout, rewards, advantages and reference log-probs of one step (device arrays)."""
        t0 = time.perf_counter()
        rollout, rewards, metrics = self.collect(model)
        t_roll = time.perf_counter() - t0
        scaled = jnp.asarray(rewards)
        if self.reward_norm is not None and self.norm_state is not None:  # across steps
            scaled, self.norm_state = self.reward_norm.update(self.norm_state, scaled)
        adv, adv_m = grpo_advantages(scaled, self.cfg.group_size, estimator=self.cfg.estimator)
        arrays: dict[str, Any] = {
            "policy": {k: jnp.asarray(v) for k, v in rollout.batch.items()},
            "old_logps": jnp.asarray(rollout.old_logps),
            "advantages": adv,
        }
        if self._ref is not None:
            arrays["ref_logps"] = self.reference_logps(arrays["policy"])
        metrics = {
            **metrics,
            # reward/*/mean are the first rollout's (unbiased); the kept groups score higher
            "reward/kept/mean": float(rewards.mean()),
            "completion_length": float(rollout.lengths.mean()),
            "truncated_fraction": float(rollout.truncated.mean()),
            "time/rollout_s": t_roll,
        }
        return Experience(arrays, len(rollout), metrics, adv_m["zero_std_fraction"], version)

    # -- the step's experience, synchronous or overlapped ------------------------------------

    def next(
        self, step: int, last: int, model_now: Callable[[], nnx.Module], version: int
    ) -> Experience:
        """The experience of `step` (1-based). Overlapped, it was requested a step or more
        ago, and the next `max_staleness` steps (never beyond `last`) are requested now
        from `model_now()`, the parameters `version` updates in."""
        if not self.cfg.async_rollout:
            return self.experience(model_now(), version)
        self._record_at = {k: v for k, v in self._record_at.items() if k >= step}
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="grpo-rollout")
        if not self._pending:
            self._submit(step, model_now(), version)
        exp = self._pending.popleft().result()
        ahead = step + 1 + len(self._pending)
        while len(self._pending) < self.cfg.max_staleness and ahead <= last:
            self._submit(ahead, model_now(), version)  # runs while this step's update does
            ahead += 1
        return exp

    def _submit(self, step: int, model: nnx.Module, version: int) -> None:
        assert self._pool is not None
        self._record_at[step] = self._sampling_state()
        if self.device is None:
            self._pending.append(self._pool.submit(self.experience, model, version))
            return
        graphdef, weights = nnx.split(model)
        copy = nnx.merge(graphdef, jax.device_put(weights, self.device))  # this step's sync
        self._pending.append(self._pool.submit(self._experience_on_device, copy, version))

    def _experience_on_device(self, model: nnx.Module, version: int) -> Experience:
        with jax.default_device(self.device):  # the worker's own arrays land there too
            return self.experience(model, version)

    def _sampling_state(self) -> dict[str, Any]:
        return {
            "rng": np.asarray(jax.random.key_data(self.rng)).tolist(),
            "prompt_order": self._order.bit_generator.state,
            "queue": [int(i) for i in self._queue],
        }

    # -- checkpoints -------------------------------------------------------------------------

    def record(self, done: int) -> dict[str, Any]:
        """The state the rollout of step `done + 1` starts from (JSON-able)."""
        sampling = self._record_at.get(done + 1) or self._sampling_state()
        norm = None if self.norm_state is None else np.asarray(self.norm_state).tolist()
        return {**sampling, "norm_state": norm}

    def restore(self, rec: Mapping[str, Any]) -> None:
        self.rng = jax.random.wrap_key_data(
            jnp.asarray(rec["rng"], jnp.uint32), impl=jax.random.key_impl(self.rng)
        )
        self._order.bit_generator.state = rec["prompt_order"]
        self._queue = list(rec["queue"])
        if rec.get("norm_state") is not None and self.norm_state is not None:
            self.norm_state = NormState(*jnp.asarray(rec["norm_state"], jnp.float32))

    def close(self) -> None:
        """Wait for (and drop) rollouts sampled ahead; nothing runs after this."""
        while self._pending:
            fut = self._pending.popleft()
            fut.cancel() or fut.exception()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
