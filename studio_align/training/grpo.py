"""GRPO trainer: rollouts from any `Policy`, plugin rewards, clipped group-relative updates.

One step:
1. Rollout with dynamic sampling (DAPO): draw `prompts_per_step` prompts, sample
   `group_size` completions each, score them; groups whose rewards are all equal carry
   no signal and are dropped, and fresh prompts are drawn until the step has
   `prompts_per_step` informative groups (at most `max_resample` extra rollouts; if still
   short, the step is filled with dropped groups, whose advantages are 0).
2. Rewards: the plugin rewards combined with config weights (`scoring.score_batch`),
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
update. The staleness is corrected by decoupled PPO (`async_correction = "decoupled"`):
the ratio is clipped against the parameters the update starts from and each token is
weighted by their ratio to the rollout's own log-probs (capped); `"clip"` clips against
the rollout's log-probs instead. `rollout/staleness` and `is_weight/mean` are logged.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from studio_align.algorithms import grpo_loss
from studio_align.algorithms.kl_controller import KLState, adaptive_kl
from studio_align.algorithms.reward_norm import NormState, running_normalizer
from studio_align.errors import ConfigError
from studio_align.models.sharding import (
    MeshConfig,
    batch_parallelism,
    batch_sharding,
)
from studio_align.training.accumulate import accumulated_grads
from studio_align.training.checkpoint import CheckpointConfig
from studio_align.training.distributed import is_main_process
from studio_align.training.ema import exported
from studio_align.training.grpo_config import (
    GRPOConfig,
    GRPOResult,
    RewardFn,
    _Experience,
    _mean_metrics,
    _to_host,
    plugin_reward_fn,
)
from studio_align.training.grpo_rollout import RolloutMixin
from studio_align.training.loop import check_finite
from studio_align.training.metrics import MetricsLogger
from studio_align.training.optim import OptimConfig
from studio_align.training.policy import Policy
from studio_align.training.progress import Progress
from studio_align.training.state import RunCheckpoints, TrainState, open_checkpoints

__all__ = ["GRPOConfig", "GRPOResult", "GRPOTrainer", "RewardFn", "plugin_reward_fn"]


class GRPOTrainer(RolloutMixin):
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
        # optax-style (init, update) pairs over small device states, checkpointed with the run
        self.kl_ctl = (
            adaptive_kl(cfg.beta, target=cfg.kl_target, horizon=cfg.kl_horizon)
            if cfg.kl_target is not None and cfg.beta > 0
            else None
        )
        self.kl_state: Any = self.kl_ctl.init() if self.kl_ctl is not None else None
        self.reward_norm = running_normalizer() if cfg.reward_norm else None
        self.norm_state: Any = self.reward_norm.init() if self.reward_norm is not None else None
        main = is_main_process()  # metrics.jsonl is process 0's alone
        self.logger = (
            MetricsLogger(run_dir, "grpo", fire_hook=fire_hook) if run_dir and main else None
        )
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
        if self.logger is not None:
            self.logger.resume_at(self.step_count)  # fresh: emptied; resumed: steps > it dropped
        self._decoupled = cfg.async_rollout and cfg.async_correction == "decoupled"
        self._update = jax.jit(
            self._make_update(),
            # async: the worker may still sample from these parameters, so keep them
            donate_argnums=(2,) if cfg.async_rollout else (0, 1, 2),
            out_shardings=(*state.shardings, state.replicated),
        )
        # decoupled PPO for stale rollouts: the log-probs of the parameters an update starts from
        whole = self._scorer(grouped=True)  # a whole rollout keeps its groups together
        self._prox_logps = jax.jit(
            lambda params, rest, b: whole(nnx.merge(self.graphdef, params, rest), b)[0]
        )
        self._ref_logps: Callable | None = None
        if ref_model is not None:
            ref_graphdef, ref_state = nnx.split(ref_model)
            ref_fn = jax.jit(lambda st, b: whole(nnx.merge(ref_graphdef, st), b)[0])
            self._ref_logps = lambda b: ref_fn(ref_state, b)

    # -- the jitted update -------------------------------------------------------------------

    def _scorer(self, *, grouped: bool) -> Callable:
        """`policy.logps`, or its grouped form (each prompt scored once for its G samples)
        when the policy offers one and the rows arrive as whole, contiguous groups."""
        g, policy = self.cfg.group_size, self.policy
        if grouped and hasattr(policy, "grouped_logps"):
            return lambda model, batch: policy.grouped_logps(model, batch, g)
        return policy.logps

    def _make_update(self) -> Callable:
        cfg = self.cfg
        options: dict[str, Any] = dict(
            epsilon=cfg.epsilon,
            epsilon_high=cfg.epsilon_high,
            kl=cfg.kl,
            aggregation=cfg.aggregation,
            importance=cfg.importance,
        )

        self_prox = self._decoupled and cfg.mu * cfg.minibatches == 1
        # several minibatches draw rows at random, breaking groups up
        scorer = self._scorer(grouped=cfg.minibatches == 1)

        def loss_fn(model: nnx.Module, batch: Mapping[str, Any]) -> tuple:
            logps, mask, entropy = scorer(model, batch["policy"])
            # beta rides in the batch (a scalar array) when adaptive: no recompile per value
            beta = batch.get("beta", cfg.beta)
            # one update per step: it starts from the parameters being differentiated, so
            # the proximal log-probs are this very forward's (no extra pass)
            prox = jax.lax.stop_gradient(logps) if self_prox else batch.get("prox_logps")
            loss, metrics = grpo_loss(
                logps, batch["old_logps"], batch.get("ref_logps"), batch["advantages"], mask,
                beta=beta, prox_logps=prox, **options,
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
        if self._decoupled and cfg.mu * cfg.minibatches > 1:
            # clip every update against the parameters this step starts from: a stale
            # rollout needs one forward pass for them; a fresh one has them already
            arrays = dict(exp.arrays)
            if exp.version < self._version:
                arrays["prox_logps"] = self._prox_logps(self.params, self.rest, arrays["policy"])
            else:
                arrays["prox_logps"] = arrays["old_logps"]
            exp = dataclasses.replace(exp, arrays=arrays)
        window = []
        for _ in range(cfg.mu):
            perm = self._mb_rng.permutation(n)  # fresh minibatches each pass
            for k in range(cfg.minibatches):
                if cfg.minibatches == 1:  # the whole rollout: order is immaterial, no gather
                    mb = jax.tree.map(self._place, exp.arrays)
                else:
                    rows = jnp.asarray(perm[k * size : (k + 1) * size])
                    mb = jax.tree.map(lambda x, rows=rows: self._place(x[rows]), exp.arrays)
                if self.kl_state is not None:
                    mb["beta"] = self._place(self.kl_state.coef)
                self.params, self.rest, self.opt_state, m = self._update(
                    self.params, self.rest, self.opt_state, mb
                )
                window.append(m)
        # the update's metrics are averaged on the device: no host sync here
        out: dict[str, Any] = dict(window[0] if len(window) == 1 else _mean_metrics(window))
        out.update(exp.metrics)
        out["kept_zero_std_fraction"] = exp.zero_std
        if self.kl_ctl is not None and "kl" in out:  # on device: no host sync
            out["kl/beta"] = self.kl_state.coef
            self.kl_state = self.kl_ctl.update(self.kl_state, out["kl"], 1)
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
            "kl_state": None if self.kl_state is None else np.asarray(self.kl_state).tolist(),
            "norm_state": None if self.norm_state is None else np.asarray(self.norm_state).tolist(),
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
        if rec.get("kl_state") is not None and self.kl_state is not None:
            self.kl_state = KLState(*jnp.asarray(rec["kl_state"], jnp.float32))
        if rec.get("norm_state") is not None and self.norm_state is not None:
            self.norm_state = NormState(*jnp.asarray(rec["norm_state"], jnp.float32))

    def train(self, steps: int | None = None) -> GRPOResult:
        """Run steps until `steps` (default `cfg.steps`) are done, resuming where it left off.

        Metrics stay on the device until a log step (`log_every`), a checkpoint or the end."""
        t0 = time.perf_counter()
        result = GRPOResult(steps=steps or self.cfg.steps)
        pending: list[dict[str, Any]] = []
        progress = Progress(result.steps, start=self.step_count, stage="grpo",
                            enabled=self.logger is not None)  # fmt: skip
        try:
            for s in range(self.step_count + 1, result.steps + 1):
                m = self.step(fetch=False, last=result.steps)
                progress.update(s)
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
            progress.close()
        if self._ckpt is not None:
            self._ckpt.checkpointer.wait()
        nnx.update(self.model, exported(self.params, self.opt_state), self.rest)
        result.seconds = time.perf_counter() - t0
        result.compiles = self.compiles
        return result
