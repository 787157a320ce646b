"""GRPO's experience side: drawing prompts, rollouts with dynamic sampling, rewards,
advantages and reference log-probs, synchronously or on a worker thread.

`RolloutMixin` is mixed into `grpo.GRPOTrainer`, which owns the state these methods read
(`policy`, `prompts`, `reward_fn`, `cfg`, the RNGs and the overlapped-rollout queue); it
is split out so the trainer file holds the update and the run, and this one the data.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.algorithms import grpo_advantages, overlong_penalty
from studio_align.training.grpo_config import _Experience
from studio_align.training.policy import Rollout


class RolloutMixin:
    """Rollout and experience methods of `GRPOTrainer` (see the module docstring)."""

    # set by GRPOTrainer.__init__
    policy: Any
    prompts: list[Any]
    reward_fn: Any
    cfg: Any
    rng: Any
    graphdef: Any
    params: Any
    rest: Any
    _order: np.random.Generator
    _queue: list[int]
    _pending: Any
    _pool: ThreadPoolExecutor | None
    _record_at: dict[int, dict[str, Any]]
    _version: int
    _ref_logps: Any
    reward_norm: Any
    norm_state: Any

    # -- rollouts ----------------------------------------------------------------------------

    def _next_prompts(self, n: int) -> list[Any]:
        out: list[Any] = []
        while len(out) < n:
            if not self._queue:
                self._queue = list(self._order.permutation(len(self.prompts)))
            out.append(self.prompts[self._queue.pop()])
        return out

    def _current_model(self) -> nnx.Module:
        return nnx.merge(self.graphdef, self.params, self.rest)

    def _rollout(
        self, records: list[Any], model: nnx.Module | None = None
    ) -> tuple[Rollout, np.ndarray, dict[str, float], list]:
        g = self.cfg.group_size
        self.rng, key = jax.random.split(self.rng)
        inputs = [r["prompt"] if isinstance(r, Mapping) else r for r in records]
        model = model if model is not None else self._current_model()
        rollout = self.policy.sample(model, inputs, g, key)
        per_sample = [r for r in records for _ in range(g)]
        rewards, metrics = self.reward_fn(per_sample, rollout)
        rewards = np.asarray(rewards, np.float32)
        if self.cfg.overlong_penalty > 0:
            limit = self.cfg.max_tokens or rollout.mask.shape[1]
            lengths = np.where(rollout.truncated, limit + 1, rollout.lengths)
            pen = np.asarray(
                overlong_penalty(lengths, max_tokens=limit, buffer=self.cfg.overlong_buffer)
            )
            rewards = rewards + self.cfg.overlong_penalty * pen
            metrics = {**metrics, "reward/overlong/mean": float(pen.mean())}
        metrics = {**metrics, "reward/total/mean": float(rewards.mean())}
        return rollout, rewards, metrics, per_sample

    def collect(
        self, model: nnx.Module | None = None
    ) -> tuple[Rollout, np.ndarray, dict[str, float]]:
        """One step's rollout after dynamic sampling: `prompts_per_step` groups.

        `model`: the policy to sample from (default: the current parameters)."""
        cfg, g, p = self.cfg, self.cfg.group_size, self.cfg.prompts_per_step
        rollout, rewards, metrics, _ = self._rollout(self._next_prompts(p), model)
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
            r2, w2, _, _ = self._rollout(self._next_prompts(p), model)
            split(r2, w2)
            extra += 1
        filled = max(0, p - len(keep_r))
        parts_r = (keep_r + spare_r)[:p]
        parts_w = (keep_w + spare_w)[:p]
        metrics["rollouts"] = 1.0 + extra
        metrics["dynamic_sampling/filled"] = float(filled) / p
        return Rollout.concat(parts_r), np.concatenate(parts_w), metrics

    def _experience(self, model: nnx.Module | None, version: int) -> _Experience:
        """Rollout, rewards, advantages and reference log-probs of one step (device arrays)."""
        t0 = time.perf_counter()
        rollout, rewards, metrics = self.collect(model)
        t_roll = time.perf_counter() - t0
        scaled = jnp.asarray(rewards)
        if self.reward_norm is not None:  # running standardisation across steps
            scaled, self.norm_state = self.reward_norm.update(self.norm_state, scaled)
        adv, adv_m = grpo_advantages(scaled, self.cfg.group_size, estimator=self.cfg.estimator)
        arrays: dict[str, Any] = {
            "policy": {k: jnp.asarray(v) for k, v in rollout.batch.items()},
            "old_logps": jnp.asarray(rollout.old_logps),
            "advantages": adv,
        }
        if self._ref_logps is not None:
            arrays["ref_logps"] = self._ref_logps(arrays["policy"])
        metrics = {
            **metrics,
            # reward/*/mean are the first rollout's (unbiased); the kept groups score higher
            "reward/kept/mean": float(rewards.mean()),
            "completion_length": float(rollout.lengths.mean()),
            "truncated_fraction": float(rollout.truncated.mean()),
            "time/rollout_s": t_roll,
        }
        return _Experience(arrays, len(rollout), metrics, adv_m["zero_std_fraction"], version)

    def _sampling_state(self) -> dict[str, Any]:
        return {
            "rng": np.asarray(jax.random.key_data(self.rng)).tolist(),
            "prompt_order": self._order.bit_generator.state,
            "queue": [int(i) for i in self._queue],
        }

    def _submit(self, step: int) -> None:
        """Queue the experience of `step`, sampled from the parameters current now."""
        assert self._pool is not None
        self._record_at[step] = self._sampling_state()
        model = nnx.merge(self.graphdef, self.params, self.rest)
        self._pending.append(self._pool.submit(self._experience, model, self._version))

    def _next_experience(self, step: int, last: int) -> _Experience:
        if not self.cfg.async_rollout:
            return self._experience(None, self._version)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="grpo-rollout")
        if not self._pending:
            self._submit(step)
        exp = self._pending.popleft().result()
        ahead = step + 1 + len(self._pending)
        while len(self._pending) < self.cfg.max_staleness and ahead <= last:
            self._submit(ahead)  # runs while this step's update does
            ahead += 1
        return exp

    def _drain(self) -> None:
        """Wait for (and drop) rollouts sampled ahead; nothing runs after this."""
        while self._pending:
            fut = self._pending.popleft()
            fut.cancel() or fut.exception()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
