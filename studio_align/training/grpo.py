"""GRPO as a `train_loop` step: rollouts from any `Policy`, plugin rewards, clipped
group-relative updates.

    train_loop(model, run, GRPOStep(policy, prompts, reward_fn, cfg, ref_model=ref), name="grpo")

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

Design choices: the run (steps, seed, logging, checkpoints, resume, progress,
finiteness checks) is the shared `train_loop`'s, configured by `[train]`; this step
owns the rollouts (`grpo_rollout.Rollouts`, its batch source) and the updates. The
update is one `jax.jit` step over the loop's split `(params, rest, opt_state)` with
donation, compiled once (every minibatch has the same shape), sharded like every
trainer's (parameters by logical axes over the `(data, fsdp)` mesh, each minibatch
split over both axes), so it is the same code on one device or many; the algorithm's
string options are resolved into a closure before tracing. The policy is anything
implementing `policy.Policy`.

Host synchronisation: the update's metrics stay on the device until the loop's log
step. Overlapped rollout (`async_rollout`): one worker thread produces the experience
(rollout, rewards, reference log-probs, advantages) of the next `max_staleness` steps
from the parameters current when each was requested, while the main thread runs the
update (which then keeps its input parameters: no donation). The staleness is corrected by decoupled PPO (`async_correction = "decoupled"`):
the ratio is clipped against the parameters the update starts from and each token is
weighted by their ratio to the rollout's own log-probs (capped); `"clip"` clips against
the rollout's log-probs instead. `rollout/staleness` and `is_weight/mean` are logged.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from studio_align.algorithms import grpo_loss
from studio_align.algorithms.kl_controller import KLController, KLState, adaptive_kl
from studio_align.errors import ConfigError
from studio_align.models.sharding import batch_parallelism, batch_sharding
from studio_align.training.accumulate import accumulated_grads
from studio_align.training.grpo_config import GRPOConfig, RewardFn, plugin_reward_fn
from studio_align.training.grpo_rollout import Rollouts, scorer
from studio_align.training.policy import Policy
from studio_align.training.state import TrainState

if TYPE_CHECKING:
    from studio_align.training.loop import TrainRunConfig

__all__ = ["GRPOConfig", "GRPOStep", "RewardFn", "plugin_reward_fn"]


@jax.jit
def _mean_metrics(window: list[dict[str, jax.Array]]) -> dict[str, jax.Array]:
    return jax.tree.map(lambda *xs: jnp.mean(jnp.stack(xs)), *window)


class GRPOStep:
    """One rollout and its `mu * minibatches` updates: the `train_loop` step of GRPO.

    `rollouts` (the batch source: prompt order, sampling key, reward normaliser) exists
    from `bind`, seeded with the run's `train.seed`.
    """

    steps_per_epoch = None

    def __init__(
        self,
        policy: Policy,
        prompts: Sequence[Any],
        reward_fn: RewardFn,
        cfg: GRPOConfig,
        *,
        ref_model: nnx.Module | None = None,
    ):
        if cfg.beta > 0 and ref_model is None:
            raise ConfigError("grpo.beta > 0 needs a reference model")
        if not prompts:
            raise ConfigError("GRPO needs at least one prompt")
        self.policy, self.cfg, self.reward_fn = policy, cfg, reward_fn
        self.prompts = list(prompts)
        self.ref_model = ref_model
        self.updates_per_step = cfg.mu * cfg.minibatches
        self.examples_per_step = cfg.prompts_per_step * cfg.group_size
        self.compiles = 0
        # an optax-style (init, update) pair over a small device state, checkpointed
        self.kl_ctl: KLController | None = (
            adaptive_kl(cfg.beta, target=cfg.kl_target, horizon=cfg.kl_horizon)
            if cfg.kl_target is not None and cfg.beta > 0
            else None
        )
        self.kl_state: KLState | None = self.kl_ctl.init() if self.kl_ctl is not None else None
        self._decoupled = cfg.async_rollout and cfg.async_correction == "decoupled"
        self._version = 0  # updates applied so far in this process (rollout staleness)
        self._last = 0  # the run's final step: nothing is sampled beyond it
        self._rollouts: Rollouts | None = None
        self._mb_rng = np.random.default_rng()
        self._mesh: jax.sharding.Mesh | None = None
        self._update: Callable[..., tuple] | None = None
        self._prox_logps: Callable[..., jax.Array] | None = None

    @property
    def devices(self) -> list[jax.Device] | None:
        """The training mesh's devices: all (None) unless `rollout_devices` keeps the last
        few of them for the rollout (read by `train_loop`, after `jax.distributed` is up)."""
        k = self.cfg.rollout_devices
        if not k:
            return None
        if jax.process_count() > 1:
            raise ConfigError("grpo.rollout_devices needs one process: each process would "
                              "sample the whole step on its own devices")  # fmt: skip
        local = jax.local_devices()
        if k >= len(local):
            raise ConfigError(f"grpo.rollout_devices={k} leaves no device to train on "
                              f"({len(local)} device(s) here)")  # fmt: skip
        return local[: len(local) - k]

    def _rollout_device(self) -> jax.Device | None:
        k = self.cfg.rollout_devices
        return jax.local_devices()[-k] if k else None

    @property
    def rollouts(self) -> Rollouts:
        assert self._rollouts is not None, "bind() first"
        return self._rollouts

    # -- the jitted update -------------------------------------------------------------------

    def bind(self, state: TrainState, run: TrainRunConfig, total_steps: int) -> None:
        cfg, seed = self.cfg, run.train.seed
        self._last, self._mesh = total_steps, state.mesh
        self._rollouts = Rollouts(self.policy, self.prompts, self.reward_fn, cfg, seed=seed,
                                  ref_model=self.ref_model,
                                  device=self._rollout_device())  # fmt: skip
        self._mb_rng = np.random.default_rng([seed, 1])
        self._update = state.jit_update(
            # async: the worker may still sample from these parameters, so keep them
            self._make_update(state),
            donate=(2,) if cfg.async_rollout else (0, 1, 2),
        )
        # decoupled PPO for stale rollouts: the log-probs of the parameters an update starts from
        whole = scorer(self.policy, cfg.group_size, grouped=True)
        graphdef = state.graphdef
        self._prox_logps = jax.jit(
            lambda params, rest, b: whole(nnx.merge(graphdef, params, rest), b)[0]
        )

    def _make_update(self, state: TrainState) -> Callable:
        cfg, graphdef, tx, wrt = self.cfg, state.graphdef, state.tx, state.wrt
        options: dict[str, Any] = dict(
            epsilon=cfg.epsilon,
            epsilon_high=cfg.epsilon_high,
            kl=cfg.kl,
            aggregation=cfg.aggregation,
            importance=cfg.importance,
        )

        self_prox = self._decoupled and cfg.mu * cfg.minibatches == 1
        # several minibatches draw rows at random, breaking groups up
        score = scorer(self.policy, cfg.group_size, grouped=cfg.minibatches == 1)

        def loss_fn(model: nnx.Module, batch: Mapping[str, Any]) -> tuple:
            logps, mask, entropy = score(model, batch["policy"])
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
            metrics, grads, rest = accumulated_grads(loss_fn, wrt, graphdef, params, rest, batch)
            metrics["grad_norm"] = optax.global_norm(grads)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), rest, opt_state, metrics

        return update

    def _place(self, x: jax.Array) -> jax.Array:
        """A minibatch array split over the mesh's batch axes (replicated if it does not divide)."""
        assert self._mesh is not None
        if x.ndim and x.shape[0] % batch_parallelism(self._mesh) == 0:
            return jax.device_put(x, batch_sharding(self._mesh, x.ndim))
        return jax.device_put(
            x, jax.sharding.NamedSharding(self._mesh, jax.sharding.PartitionSpec())
        )

    # -- one step ----------------------------------------------------------------------------

    def step(self, state: TrainState, i: int) -> dict[str, Any]:
        """The rollout of step `i` and its updates; the metrics stay on the device."""
        assert self._update is not None and self._prox_logps is not None, "bind() first"
        cfg = self.cfg
        t0 = time.perf_counter()
        exp = self.rollouts.next(i + 1, self._last, state.model, self._version)
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
                arrays["prox_logps"] = self._prox_logps(state.params, state.rest, arrays["policy"])
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
                state.params, state.rest, state.opt_state, m = self._update(
                    state.params, state.rest, state.opt_state, mb
                )
                window.append(m)
        # the update's metrics are averaged on the device: no host sync here
        out: dict[str, Any] = dict(window[0] if len(window) == 1 else _mean_metrics(window))
        out.update(exp.metrics)
        out["kept_zero_std_fraction"] = exp.zero_std
        if self.kl_ctl is not None and self.kl_state is not None and "kl" in out:  # on device
            out["kl/beta"] = self.kl_state.coef
            self.kl_state = self.kl_ctl.update(self.kl_state, out["kl"], 1)
        out["rollout/staleness"] = float(self._version - exp.version)
        self._version += 1
        if cfg.async_rollout:
            out["time/rollout_wait_s"] = t_wait
        out["time/update_s"] = time.perf_counter() - t0 - t_wait
        return out

    # -- checkpoints -------------------------------------------------------------------------

    def record(self, done: int) -> dict[str, Any]:
        """Everything besides the trees that step `done + 1` depends on (exact resume)."""
        return {
            **self.rollouts.record(done),
            "minibatch_order": self._mb_rng.bit_generator.state,
            "kl_state": None if self.kl_state is None else np.asarray(self.kl_state).tolist(),
        }

    def restore(self, record: Mapping[str, Any]) -> None:
        self.rollouts.restore(record)
        self._mb_rng.bit_generator.state = record["minibatch_order"]
        if record.get("kl_state") is not None and self.kl_state is not None:
            self.kl_state = KLState(*jnp.asarray(record["kl_state"], jnp.float32))

    def close(self) -> None:
        if self._rollouts is not None:
            self._rollouts.close()
