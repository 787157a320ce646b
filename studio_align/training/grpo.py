"""GRPO trainer: rollouts from any `Policy`, plugin rewards, clipped group-relative updates.

One step:
1. Rollout with dynamic sampling (DAPO): draw `prompts_per_step` prompts, sample
   `group_size` completions each, score them; groups whose rewards are all equal carry
   no signal and are dropped, and fresh prompts are drawn until the step has
   `prompts_per_step` informative groups (at most `max_resample` extra rollouts; if still
   short, the step is filled with dropped groups, whose advantages are 0).
2. Rewards: the plugin rewards combined with config weights (`rewards.score_batch`),
   plus DAPO's soft overlong penalty counted in tokens.
3. Advantages per group (`grpo`, `dr_grpo` or `rloo`), reference log-probs if beta > 0.
4. `mu` passes over the rollout in `minibatches` minibatches, one optimizer update each,
   with the rollout's log-probs as the old log-probs of the clipped ratio (clip-higher
   with `epsilon_high`), so pass 1 is on-policy and later passes are off-policy.

Logged per step: each reward's mean and the total's (over the step's first rollout, so
not inflated by dynamic sampling; `reward/kept/mean` is over the groups trained on),
the zero-variance group fraction of the first rollout, KL to the reference, clip
fraction, entropy, completion length, rollouts drawn, rollout and update seconds.

Design choices: the update is one `jax.jit` step over split `(params, rest, opt_state)`
with donation, compiled once (every minibatch has the same shape), sharded like the
shared train loop (parameters by logical axes over the `(data, fsdp)` mesh, each
minibatch split over both axes), so it is the same code on one device or many; the
algorithm's
string options are resolved into a closure before tracing. Rollouts, rewards and
dynamic sampling are host-side Python: they are data-dependent and cheap next to the
forward passes. The policy is anything implementing `policy.Policy`.

Host synchronisation: the update's metrics stay on the device; `train()` fetches them
once per `log_every` window (and before a checkpoint, which must never hold a diverged
policy). Overlapped rollout (`async_rollout`): one worker thread produces the experience
(rollout, rewards, reference log-probs, advantages) of the next `max_staleness` steps
from the parameters current when each was requested, while the main thread runs the
update; the rollout's own log-probs are the clipped ratio's old log-probs, so the
staleness is corrected like any off-policy pass (`rollout/staleness` is logged).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from pydantic import Field

from studio_align.algorithms import grpo_advantages, grpo_loss, overlong_penalty
from studio_align.config import Strict
from studio_align.errors import ConfigError
from studio_align.models.sharding import (
    MeshConfig,
    batch_parallelism,
    batch_sharding,
)
from studio_align.rewards import score_batch
from studio_align.training.accumulate import accumulated_grads
from studio_align.training.checkpoint import CheckpointConfig
from studio_align.training.loop import check_finite
from studio_align.training.metrics import MetricsLogger
from studio_align.training.optim import OptimConfig
from studio_align.training.policy import Policy, Rollout
from studio_align.training.state import RunCheckpoints, TrainState, open_checkpoints

RewardFn = Callable[[list[Any], Rollout], tuple[np.ndarray, dict[str, float]]]


class GRPOConfig(Strict):
    """`[grpo]`: the algorithm and its rollouts."""

    steps: int = Field(default=100, ge=1)
    prompts_per_step: int = Field(default=8, ge=1)
    group_size: int = Field(default=8, ge=2)
    mu: int = Field(default=1, ge=1)  # optimisation passes per rollout
    minibatches: int = Field(default=1, ge=1)  # optimizer updates per pass
    estimator: Literal["grpo", "dr_grpo", "rloo"] = "grpo"
    epsilon: float = Field(default=0.2, gt=0)
    epsilon_high: float | None = Field(default=0.28, gt=0)  # DAPO clip-higher; None = epsilon
    beta: float = Field(default=0.0, ge=0)  # KL penalty to the reference
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
    seed: int = 0
    log_every: int = Field(default=1, ge=1)
    # overlapped rollout: step n+1's groups are sampled (and scored) in a thread while step
    # n's update runs, from parameters at most `max_staleness` updates old; the clipped
    # importance ratio against the rollout's own log-probs corrects for it
    async_rollout: bool = False
    max_staleness: int = Field(default=1, ge=1)


def plugin_reward_fn(
    rewards: Any,
    weights: Mapping[str, float] | None = None,
    *,
    context: Mapping[str, Any] | None = None,
) -> RewardFn:
    """A `RewardFn` from plugin rewards (`{name: Reward}` or a list) and config weights.

    Columns are the rollout's (`completions`, decoded `plans`, ...) plus every key of the
    prompt records (dicts) other than `prompt`, repeated per sample; `prompts` are the
    policy inputs.
    """

    def fn(records: list[Any], rollout: Rollout) -> tuple[np.ndarray, dict[str, float]]:
        columns: dict[str, list[Any]] = dict(rollout.columns)
        columns["prompts"] = [r["prompt"] if isinstance(r, Mapping) else r for r in records]
        if records and isinstance(records[0], Mapping):
            for key in records[0]:
                if key != "prompt":
                    columns[key] = [r[key] for r in records]
        scores = score_batch(rewards, weights, columns, context=context)
        return scores.total.astype(np.float32), scores.metrics

    return fn


@dataclass
class GRPOResult:
    steps: int
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0
    compiles: int = 0

    def curve(self, key: str = "reward/total/mean") -> list[float]:
        return [h[key] for h in self.history if key in h]


class GRPOTrainer:
    """Holds the jitted update and runs `step()`s; `train()` runs the configured steps.

    With `cfg.async_rollout` the experience of the next `max_staleness` steps (rollout,
    rewards, reference log-probs) is produced by one worker thread from the parameters
    current when it was requested, while the main thread runs the update: the update
    then keeps its input parameters (no donation), so the worker's copy stays valid.
    """

    def __init__(
        self,
        policy: Policy,
        model: nnx.Module,
        prompts: Sequence[Any],
        reward_fn: RewardFn,
        cfg: GRPOConfig,
        optim: OptimConfig,
        *,
        ref_model: nnx.Module | None = None,
        run_dir: str | Path | None = None,
        wrt: Any = nnx.Param,
        fire_hook: bool = False,
        mesh: MeshConfig | None = None,
        devices: Sequence[jax.Device] | None = None,
        checkpoint: CheckpointConfig | None = None,
    ):
        if cfg.beta > 0 and ref_model is None:
            raise ConfigError("grpo.beta > 0 needs a reference model")
        if not prompts:
            raise ConfigError("GRPO needs at least one prompt")
        self.policy, self.model, self.cfg = policy, model, cfg
        self.prompts = list(prompts)
        self.reward_fn = reward_fn
        self.ref_model = ref_model
        self.rng = jax.random.key(cfg.seed)
        self._order = np.random.default_rng(cfg.seed)
        self._queue: list[int] = []
        self._mb_rng = np.random.default_rng([cfg.seed, 1])
        self.logger = MetricsLogger(run_dir, "grpo", fire_hook=fire_hook) if run_dir else None
        updates = cfg.steps * cfg.mu * cfg.minibatches
        # the train state every trainer shares (state.py): parameters placed by their
        # logical axes, the minibatch over (data, fsdp); one device is the 1 x 1 case
        state = TrainState.create(model, optim, updates, mesh, wrt=wrt, devices=devices,
                                  name="grpo")  # fmt: skip
        self.tx, self.schedule, self.mesh = state.tx, state.schedule, state.mesh
        self.graphdef: Any = state.graphdef
        self.params: Any = state.params
        self.rest: Any = state.rest
        self.opt_state: Any = state.opt_state
        self._state = state
        self.wrt = wrt
        self.compiles = 0
        self.step_count = 0  # optimizer steps (rollouts) done, restored on resume
        self._version = 0  # updates applied so far in this process (rollout staleness)
        self._pending: deque[Future[_Experience]] = deque()
        self._pool: ThreadPoolExecutor | None = None
        self._record_at: dict[int, dict[str, Any]] = {}  # async: sampling state per step
        self._ckpt: RunCheckpoints | None = None
        if checkpoint is not None and (checkpoint.dir or run_dir):
            self._ckpt = open_checkpoints(
                checkpoint, run_dir or ".", total_steps=cfg.steps, run="grpo"
            )
            if self._ckpt.latest is not None:
                self._restore()
        self._update = jax.jit(
            self._make_update(),
            # async: the worker may still sample from these parameters, so keep them
            donate_argnums=(2,) if cfg.async_rollout else (0, 1, 2),
            out_shardings=(*state.shardings, state.replicated),
        )
        self._ref_logps: Callable | None = None
        if ref_model is not None:
            ref_graphdef, ref_state = nnx.split(ref_model)
            ref_fn = jax.jit(lambda st, b: policy.logps(nnx.merge(ref_graphdef, st), b)[0])
            self._ref_logps = lambda b: ref_fn(ref_state, b)

    # -- the jitted update -------------------------------------------------------------------

    def _make_update(self) -> Callable:
        cfg, policy = self.cfg, self.policy
        options: dict[str, Any] = dict(
            epsilon=cfg.epsilon,
            epsilon_high=cfg.epsilon_high,
            beta=cfg.beta,
            kl=cfg.kl,
            aggregation=cfg.aggregation,
            importance=cfg.importance,
        )

        def loss_fn(model: nnx.Module, batch: Mapping[str, Any]) -> tuple:
            logps, mask, entropy = policy.logps(model, batch["policy"])
            loss, metrics = grpo_loss(
                logps, batch["old_logps"], batch.get("ref_logps"), batch["advantages"], mask,
                **options,
            )  # fmt: skip
            m = mask.astype(jnp.float32)
            metrics["entropy"] = jnp.sum(jax.lax.stop_gradient(entropy) * m) / jnp.maximum(
                m.sum(), 1
            )
            return loss, metrics

        def update(params: Any, rest: Any, opt_state: Any, batch: Any) -> tuple:
            self.compiles += 1
            batch = jax.tree.map(lambda x: x[None], batch)  # one micro-batch
            metrics, grads, rest = accumulated_grads(
                loss_fn, self.wrt, self.graphdef, params, rest, batch
            )
            metrics["grad_norm"] = optax.global_norm(grads)
            updates, opt_state = self.tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), rest, opt_state, metrics

        return update

    def _place(self, x: jax.Array) -> jax.Array:
        """A minibatch array split over the mesh's batch axes (replicated if it does not divide)."""
        if x.ndim and x.shape[0] % batch_parallelism(self.mesh) == 0:
            return jax.device_put(x, batch_sharding(self.mesh, x.ndim))
        return jax.device_put(
            x, jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec())
        )

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
        adv, adv_m = grpo_advantages(
            jnp.asarray(rewards), self.cfg.group_size, estimator=self.cfg.estimator
        )
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

    # -- one step ----------------------------------------------------------------------------

    def step(self, *, fetch: bool = True, last: int | None = None) -> dict[str, Any]:
        """One rollout and its updates. `fetch=False` leaves the update's metrics on the
        device (`train` fetches them at its log step); `last` is the final step (async
        rollouts are not sampled beyond it)."""
        cfg = self.cfg
        t0 = time.perf_counter()
        step = self.step_count + 1
        exp = self._next_experience(step, last if last is not None else cfg.steps)
        t_wait = time.perf_counter() - t0
        n = exp.n
        if n % cfg.minibatches:
            raise ConfigError(
                f"{n} samples per step do not split into {cfg.minibatches} minibatches"
            )
        size = n // cfg.minibatches
        window = []
        for _ in range(cfg.mu):
            perm = self._mb_rng.permutation(n)  # fresh minibatches each pass
            for k in range(cfg.minibatches):
                if cfg.minibatches == 1:  # the whole rollout: order is immaterial, no gather
                    mb = jax.tree.map(self._place, exp.arrays)
                else:
                    rows = jnp.asarray(perm[k * size : (k + 1) * size])
                    mb = jax.tree.map(lambda x, rows=rows: self._place(x[rows]), exp.arrays)
                self.params, self.rest, self.opt_state, m = self._update(
                    self.params, self.rest, self.opt_state, mb
                )
                window.append(m)
        # the update's metrics are averaged on the device: no host sync here
        out: dict[str, Any] = dict(window[0] if len(window) == 1 else _mean_metrics(window))
        out.update(exp.metrics)
        out["kept_zero_std_fraction"] = exp.zero_std
        out["rollout/staleness"] = float(self._version - exp.version)
        self._version += 1
        if cfg.async_rollout:
            out["time/rollout_wait_s"] = t_wait
        if fetch:
            out = _to_host(out)
        out["time/update_s"] = time.perf_counter() - t0 - t_wait
        return out

    # -- checkpoints -------------------------------------------------------------------------

    def _trees(self) -> dict[str, Any]:
        return {"params": self.params, "rest": self.rest, "opt_state": self.opt_state}

    def _record(self) -> dict[str, Any]:
        """Everything besides the trees that the next step depends on (exact resume).

        With async rollouts the sampling state is the one from before the next step's
        rollout was requested: a resumed run redraws that rollout, on-policy."""
        sampling = self._record_at.get(self.step_count + 1) or self._sampling_state()
        return {
            "step": self.step_count,
            "data_position": self.step_count,
            **sampling,
            "minibatch_order": self._mb_rng.bit_generator.state,
        }

    def _restore(self) -> None:
        assert self._ckpt is not None
        rec = self._ckpt.restore(self._state)
        self.params, self.rest, self.opt_state = (
            self._state.params, self._state.rest, self._state.opt_state
        )  # fmt: skip
        self.step_count = int(rec["step"])
        self.rng = jax.random.wrap_key_data(
            jnp.asarray(rec["rng"], jnp.uint32), impl=jax.random.key_impl(self.rng)
        )
        self._order.bit_generator.state = rec["prompt_order"]
        self._mb_rng.bit_generator.state = rec["minibatch_order"]
        self._queue = list(rec["queue"])
        if self.logger is not None:
            self.logger.truncate_after(self.step_count)

    def train(self, steps: int | None = None) -> GRPOResult:
        """Run steps until `steps` (default `cfg.steps`) are done, resuming where it left off.

        Metrics stay on the device until a log step (`log_every`), a checkpoint or the end."""
        t0 = time.perf_counter()
        result = GRPOResult(steps=steps or self.cfg.steps)
        pending: list[dict[str, Any]] = []
        try:
            for s in range(self.step_count + 1, result.steps + 1):
                m = self.step(fetch=False, last=result.steps)
                self.step_count = s
                m["step"] = s
                pending.append(m)
                log = s % self.cfg.log_every == 0 or s == result.steps
                save = self._ckpt is not None and self._ckpt.checkpointer.should_save(
                    s, final=s == result.steps
                )
                if not (log or save):
                    continue
                for i, h in enumerate(jax.device_get(pending)):
                    h = _to_host(h)
                    # never log on or checkpoint a diverged policy
                    check_finite([h], s - len(pending) + 1 + i, "grpo")
                    result.history.append(h)
                    if self.logger is not None and log and i == len(pending) - 1:
                        self.logger.log(s, h)
                pending = []
                if save:
                    assert self._ckpt is not None
                    self._ckpt.save(s, self._trees(), self._record())
                self._record_at = {k: v for k, v in self._record_at.items() if k > s}
        finally:
            self._drain()
        if self._ckpt is not None:
            self._ckpt.checkpointer.wait()
        nnx.update(self.model, self.params, self.rest)
        result.seconds = time.perf_counter() - t0
        result.compiles = self.compiles
        return result


@dataclass
class _Experience:
    """What one GRPO step trains on (device arrays) and the rollout's host metrics."""

    arrays: dict[str, Any]
    n: int
    metrics: dict[str, float]
    zero_std: Any  # device scalar: zero-variance fraction of the kept groups
    version: int  # updates applied to the parameters that sampled it


def _to_host(m: Mapping[str, Any]) -> dict[str, float]:
    host = jax.device_get(dict(m))
    return {k: (int(v) if k == "step" else float(v)) for k, v in host.items()}


@jax.jit
def _mean_metrics(window: list[dict[str, jax.Array]]) -> dict[str, jax.Array]:
    return jax.tree.map(lambda *xs: jnp.mean(jnp.stack(xs)), *window)
