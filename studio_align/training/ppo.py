"""`train ppo`: PPO with a learned critic on any task whose policy exposes features.

One rollout, then `epochs x minibatches` optimizer updates on it, all through the shared
`train_loop` (its jitted step, sharding, checkpoints, metrics and progress). The loop's
step is one update; its batch source (`PPOExperience`, `reads_model = True`) draws a
fresh rollout from the current weights on every `epochs * minibatches`-th step:

1. `prompts_per_step` prompts (drawn with `(seed, rollout)`), `samples` completions
   each, from the task's `Policy`; plugin rewards score them (`[rewards]`, as GRPO);
2. the rollout's old values (value head), reference log-probs (if `kl_coef > 0`), the
   KL-shaped per-token rewards, GAE advantages (whitened) and returns
   (`algorithms.ppo`); the KL coefficient then follows `kl_controller` (fixed, or
   adaptive with `kl_target`), its state saved in each checkpoint's record;
3. minibatches of a per-epoch permutation (drawn with `(seed, rollout, epoch)`).

Exact resume: everything a rollout depends on is a function of `(seed, rollout index)`
and the weights, and checkpoints fall on rollout boundaries (`checkpoint.every` counts
rollouts), so a killed run resumes bitwise where an uninterrupted one would be.

A policy supports PPO when it has `features(model, batch) -> [N, T, D]` and
`feature_dim(model)` (`LMPolicy`: the hidden state before each completion token;
`FlowPolicy`: x_t and the velocity pooled per SDE step, so `train ppo --task flow`
works); `logps_and_features` lets a shared value head reuse the policy's forward pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.algorithms.kl_controller import KLState, adaptive_kl, fixed_kl
from studio_align.algorithms.ppo import gae, ppo_loss, shaped_rewards, whiten
from studio_align.errors import ConfigError
from studio_align.plugins import get_host
from studio_align.tasks import StartingPoint
from studio_align.training.distributed import maybe_initialize
from studio_align.training.grpo_config import RewardFn, plugin_reward_fn
from studio_align.training.grpo_run import run_rewards
from studio_align.training.loop import TrainResult, train_loop
from studio_align.training.policy import prompt_width
from studio_align.training.ppo_config import PPOConfig as PPOConfig
from studio_align.training.ppo_config import PPORunConfig as PPORunConfig
from studio_align.training.run import (
    prepare_run_dir,
    read_split,
    resolve_task,
    save_for_task,
)
from studio_align.training.supervised import supervised
from studio_align.training.value_head import ValueModel, trainable, values_and_logps

HELDOUT_STREAM = 7  # fold_in constant of the held-out sampling key


class PPOExperience:
    """The loop's batch source: a rollout every `updates_per_rollout` steps, then its
    minibatches (module docstring). Called as `source(step, model)`."""

    reads_model = True

    def __init__(
        self, policy: Any, prompts: Sequence[Mapping[str, Any]], reward_fn: RewardFn,
        cfg: PPOConfig, *, ref_model: nnx.Module | None,
    ) -> None:  # fmt: skip
        self.policy, self.prompts, self.reward_fn, self.cfg = policy, list(prompts), reward_fn, cfg
        self.kl_ctl = (
            adaptive_kl(cfg.kl_coef, target=cfg.kl_target, horizon=cfg.kl_horizon)
            if cfg.kl_target is not None
            else fixed_kl(cfg.kl_coef)
        )
        self.kl_state = self.kl_ctl.init()
        self._rollout: tuple[int, dict[str, np.ndarray]] | None = None
        self.reward_calls = 0
        self._values = nnx.jit(lambda vm, b: values_and_logps(vm, policy, b)[3])
        self._ref: Any = None
        if ref_model is not None and cfg.kl_coef > 0:
            ref_graphdef, ref_state = nnx.split(ref_model)
            ref_fn = jax.jit(lambda st, b: policy.logps(nnx.merge(ref_graphdef, st), b)[0])
            self._ref = lambda b: ref_fn(ref_state, b)

    def _draw(self, r: int, vm: ValueModel) -> dict[str, np.ndarray]:
        cfg = self.cfg
        order = np.random.default_rng([cfg.seed, r])
        k = cfg.prompts_per_step
        idx = order.choice(len(self.prompts), k, replace=len(self.prompts) < k)
        chosen = [self.prompts[i] for i in idx]
        key = jax.random.fold_in(jax.random.key(cfg.seed), r)
        rollout = self.policy.sample(vm.policy, [p["prompt"] for p in chosen], cfg.samples, key)
        per_sample = [p for p in chosen for _ in range(cfg.samples)]
        scores, _ = self.reward_fn(per_sample, rollout)
        self.reward_calls += len(per_sample)
        batch = {k: jnp.asarray(v) for k, v in rollout.batch.items()}
        mask = jnp.asarray(rollout.mask, jnp.float32)
        old_logps = jnp.asarray(rollout.old_logps)
        values = self._values(vm, batch) * mask
        ref = self._ref(batch) if self._ref is not None else None
        coef = self.kl_state.coef
        rewards, rm = shaped_rewards(jnp.asarray(scores), old_logps, ref, mask, kl_coef=coef)
        adv, returns = gae(rewards, values, mask, gamma=cfg.gamma, lam=cfg.lam)
        if cfg.whiten_advantages:
            adv = whiten(adv, mask)
        self.kl_state = self.kl_ctl.update(self.kl_state, rm["kl"], 1)
        n = len(per_sample)
        out = {f"policy/{k}": np.asarray(v) for k, v in rollout.batch.items()}
        out |= {
            "old_logps": np.asarray(old_logps), "old_values": np.asarray(values),
            "advantages": np.asarray(adv), "returns": np.asarray(returns),
            "score": np.asarray(scores, np.float32),
            "seq_kl": np.full(n, float(rm["kl"]), np.float32),
            "kl_coef": np.full(n, float(coef), np.float32),
            "length": np.asarray(rollout.lengths, np.float32),
        }  # fmt: skip
        return out

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps (the loop saves it): the KL controller's state and the
        reward calls so far. Checkpoints fall on rollout boundaries, so no rollout is
        half-consumed."""
        return {"kl_coef": float(self.kl_state.coef), "reward_calls": self.reward_calls}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.kl_state = KLState(jnp.asarray(state["kl_coef"], jnp.float32))
        self.reward_calls = int(state["reward_calls"])

    def __call__(self, step: int, model: nnx.Module) -> dict[str, np.ndarray]:
        cfg = self.cfg
        u = cfg.updates_per_rollout
        r, k = divmod(step, u)
        if self._rollout is None or self._rollout[0] != r:
            self._rollout = (r, self._draw(r, model))  # type: ignore[arg-type]
        arrays = self._rollout[1]
        epoch, mb = divmod(k, cfg.minibatches)
        perm = np.random.default_rng([cfg.seed, r, epoch, 1]).permutation(cfg.rows)
        size = cfg.rows // cfg.minibatches
        rows = perm[mb * size : (mb + 1) * size]
        return {name: a[rows] for name, a in arrays.items()}


def make_ppo_loss(policy: Any, cfg: PPOConfig) -> Any:
    """`loss_fn(ValueModel, batch) -> (loss, metrics)` for the shared train loop."""
    options: dict[str, Any] = dict(epsilon=cfg.epsilon, epsilon_high=cfg.epsilon_high,
                                   value_clip=cfg.value_clip, vf_coef=cfg.vf_coef)  # fmt: skip

    def loss_fn(vm: Any, batch: Mapping[str, jax.Array]) -> tuple[jax.Array, dict]:
        pb = {k[len("policy/") :]: v for k, v in batch.items() if k.startswith("policy/")}
        logps, mask, entropy, values = values_and_logps(vm, policy, pb)
        loss, metrics = ppo_loss(
            logps, batch["old_logps"], batch["advantages"], values, batch["old_values"],
            batch["returns"], mask, **options,
        )  # fmt: skip
        m = mask.astype(jnp.float32)
        metrics["entropy"] = jnp.sum(entropy * m) / jnp.maximum(m.sum(), 1.0)
        metrics["reward/total/mean"] = jnp.mean(batch["score"])
        metrics["kl"] = jnp.mean(batch["seq_kl"])
        metrics["kl/coef"] = batch["kl_coef"][0]
        metrics["completion_length"] = jnp.mean(batch["length"])
        return loss, metrics

    return loss_fn


@dataclass
class PPORunResult:
    train: TrainResult
    history: list[dict[str, float]]
    heldout_before: dict[str, float]
    heldout_after: dict[str, float]
    checkpoint: Path
    run_dir: Path
    reward_calls: int


def heldout_reward(
    policy: Any, model: nnx.Module, records: Sequence[Mapping[str, Any]], reward_fn: RewardFn,
    key: jax.Array,
) -> dict[str, float]:  # fmt: skip
    """Mean rewards of one fresh sample per held-out prompt, with a fixed key."""
    if not records:
        return {}
    rollout = policy.sample(model, [r["prompt"] for r in records], 1, key)
    total, metrics = reward_fn(list(records), rollout)
    out = {k: float(v) for k, v in metrics.items() if k.endswith("/mean")}
    out["reward/total/mean"] = float(np.mean(total))
    return out


def train_ppo(
    cfg: PPORunConfig, *, task: Any = None, start: StartingPoint | None = None, host: Any = None
) -> PPORunResult:
    """Tune `task` (default: `cfg.task`) with PPO on its prompts and the configured rewards."""
    maybe_initialize(cfg.distributed)
    task = resolve_task(task or cfg.task, "grpo")  # PPO needs what GRPO does, plus features
    host = host or get_host()
    rewards = run_rewards(cfg, host)  # type: ignore[arg-type]
    pc = cfg.ppo
    start = start or task.start(cfg.model, seed=pc.seed, reference=pc.kl_coef > 0)
    train = task.grpo_prompts(start, read_split(task, cfg.data, "grpo", "train"))
    held = task.grpo_prompts(start, read_split(task, cfg.data, "grpo", "heldout"))
    if not train:
        raise ConfigError("data: no records to draw PPO prompts from")
    policy = task.policy(
        start, cfg.sampling, max_prompt_len=prompt_width(train + held, cfg.data.max_len)
    )
    if not hasattr(policy, "features"):
        raise ConfigError(
            f"task: {task.name!r}'s policy ({type(policy).__name__}) has no `features` for a "
            "value head, so it cannot train with PPO (GRPO needs none)"
        )
    reward_fn = plugin_reward_fn(
        rewards, cfg.rewards, context=task.reward_context(start), call=cfg.reward_call
    )
    run_dir = prepare_run_dir(cfg)
    vm = ValueModel(start.model, policy.feature_dim(start.model), shared=pc.shared_critic,
                    rngs=nnx.Rngs(pc.seed))  # fmt: skip
    ref = start.reference if pc.kl_coef > 0 else None
    if pc.kl_coef > 0 and ref is None:
        raise ConfigError("ppo.kl_coef > 0 needs a reference model (the task gave none)")
    source = PPOExperience(policy, train, reward_fn, pc, ref_model=ref)
    key = jax.random.fold_in(jax.random.key(pc.seed), HELDOUT_STREAM)
    before = heldout_reward(policy, start.model, held, reward_fn, key)
    result = train_loop(vm, cfg.loop_config(), supervised(make_ppo_loss(policy, pc), source),
                        wrt=trainable(start.wrt or nnx.Param), name="ppo")  # fmt: skip
    after = heldout_reward(policy, start.model, held, reward_fn, key)
    metrics = {**result.metrics, **{f"eval/{k}": v for k, v in after.items()}}
    path = save_for_task(task, start, run_dir, trained_by="ppo", metrics=metrics)
    return PPORunResult(
        train=result, history=result.history, heldout_before=before, heldout_after=after,
        checkpoint=path, run_dir=run_dir, reward_calls=source.reward_calls,
    )  # fmt: skip
