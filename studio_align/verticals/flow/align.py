"""Aligning the flow generator: Flow-GRPO through the shared GRPO trainer, Diffusion-DPO
through the shared train loop.

- `flow_grpo`: `FlowPolicy` rollouts (SDE, `sde_steps` steps, `noise_level`), plugin
  rewards with config weights (`aesthetic` with the reward model trained by `train
  reward` on the creators' selections, `clip_critic`, `flow_diversity`, any third-party
  reward), `training.grpo.GRPOStep` on the shared `train_loop`, with its KL-to-reference, estimators and DAPO
  clip-higher. Nothing GRPO-specific lives here.
- `flow_dpo`: chosen/rejected image pairs (a selection's pick over each unpicked
  candidate) with their condition; each step noises both images of a pair with the same
  t and noise and applies `algorithms.flow.diffusion_dpo_loss` against the frozen
  reference (the base model), captured as constants of the jitted step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from pydantic import Field, model_validator

from studio_align.algorithms.flow import (
    diffusion_dpo_loss,
    interpolate,
    velocity_anchor,
    velocity_error,
)
from studio_align.config import Strict, refuse_moved
from studio_align.errors import ConfigError
from studio_align.generation.flow_sampler import SDEConfig
from studio_align.rewards import RewardCallConfig
from studio_align.training.checkpoint import CheckpointConfig
from studio_align.training.grpo import GRPOConfig, GRPOStep, plugin_reward_fn
from studio_align.training.loop import TrainConfig, TrainResult, TrainRunConfig, train_loop
from studio_align.training.optim import OptimConfig
from studio_align.training.supervised import supervised
from studio_align.verticals.flow.policy import FlowPolicy


class FlowGRPOTrainConfig(TrainConfig):
    """`[train]` with Flow-GRPO's defaults: 8 steps, a log line (its rewards) per step,
    no progress bar or metrics hook (library calls: the experiment, the quickstart). On
    the shipped U-Net at Adam 1e-5 the win rate is reached in 2-4 steps and the Fréchet
    distance to the data grows with every step after (docs/flow.md, "Measured effect")."""

    steps: int | None = Field(8, ge=1, le=10**9)
    log_every: int = Field(1, ge=1)
    progress: bool = False
    metrics_hook: bool = False


def _flow_grpo_optim() -> OptimConfig:
    # 1e-5 / KL 0.05 chosen on the validation split for the U-Net base
    # (docs/experiments/flow-unet-base-alignment.md)
    return OptimConfig.model_validate({"name": "adam", "learning_rate": 1e-5, "decay": "constant"})


class FlowGRPOConfig(TrainRunConfig):
    """Flow-GRPO's run config: the shared sections (`[train]` steps, seed and logging;
    `[optim]`, Adam 1e-5; `[checkpoint]`, off; `[mesh]`, `[distributed]`) and, at the
    top, the rollouts, the GRPO knobs (mapped onto `GRPOConfig`) and rewards. The old
    flat `steps`, `seed` and `learning_rate` are refused with the line naming their place."""

    run_dir: Path | None = None
    train: FlowGRPOTrainConfig = Field(default_factory=FlowGRPOTrainConfig)
    optim: OptimConfig = Field(default_factory=_flow_grpo_optim)
    checkpoint: CheckpointConfig = Field(default_factory=lambda: CheckpointConfig(enabled=False))
    prompts_per_step: int = Field(4, ge=1)
    group_size: int = Field(8, ge=2)
    sde_steps: int = Field(8, ge=1)
    noise_level: float = Field(0.7, gt=0)
    guidance: float = Field(1.0, gt=0)  # 1: CFG-free rollouts (one forward per step)
    sde_window: int = Field(0, ge=0)  # Flow-GRPO-Fast: train on this many SDE steps (0: all)
    ratio_norm: bool = False  # each step's log-ratio on one scale (SDEConfig.ratio_norm)
    mu: int = Field(1, ge=1)
    minibatches: int = Field(1, ge=1)
    beta: float = Field(0.05, ge=0)  # KL to the reference (0 = off)
    epsilon: float = Field(0.2, gt=0)
    epsilon_high: float | None = Field(0.28, gt=0)  # DAPO clip-higher; None = symmetric
    estimator: str = "grpo"
    weights: dict[str, float] = Field(default_factory=lambda: {"aesthetic": 1.0})
    reward_call: RewardCallConfig = Field(default_factory=RewardCallConfig)  # reward time-outs

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        return refuse_moved(
            data,
            {"steps": "train.steps", "seed": "train.seed", "learning_rate": "optim.learning_rate"},
        )

    def with_seed(self, seed: int) -> FlowGRPOConfig:
        """This config with `train.seed = seed` (one experiment seed)."""
        return self.model_copy(update={"train": self.train.model_copy(update={"seed": seed})})

    def grpo(self) -> GRPOConfig:
        return GRPOConfig.model_validate(
            {
                "prompts_per_step": self.prompts_per_step,
                "group_size": self.group_size, "mu": self.mu, "minibatches": self.minibatches,
                "estimator": self.estimator, "epsilon": self.epsilon,
                "epsilon_high": self.epsilon_high, "beta": self.beta,
                "aggregation": "sequence-mean-token-mean", "dynamic_sampling": False,
            }
        )  # fmt: skip

    def run(self, run_dir: str | Path | None = None) -> TrainRunConfig:
        """The shared loop's sections (`run_dir`, when given, wins over `self.run_dir`)."""
        return TrainRunConfig(
            run_dir=self.run_dir if run_dir is None else Path(run_dir),
            train=TrainConfig.model_validate(self.train.model_dump()), optim=self.optim,
            mesh=self.mesh, checkpoint=self.checkpoint, distributed=self.distributed,
        )  # fmt: skip

    def sde(self) -> SDEConfig:
        return SDEConfig(steps=self.sde_steps, noise_level=self.noise_level, guidance=self.guidance,
                         window=self.sde_window, ratio_norm=self.ratio_norm)  # fmt: skip


def flow_grpo(
    model: Any, reference: Any, verticals: np.ndarray, tags: np.ndarray, cfg: FlowGRPOConfig,
    *, rewards: Mapping[str, Any], creator: str | None = None,
    context: Mapping[str, Any] | None = None, run_dir: str | Path | None = None,
    stop: Callable[[Any], bool] | None = None, check_every: int = 4, backtrack: bool = False,
    retries: int = 0, retry_lr_scale: float = 0.5,
) -> list[dict[str, float]]:  # fmt: skip
    """Align `model` in place on the conditions (`verticals` [P], `tags` [P, V]); returns
    the per-step metrics (reward means, KL, clip fraction, rollout/update seconds).

    `stop(model) -> bool` (early stopping): checked every `check_every` steps (the default
    is `GuardConfig`'s) and after the last; when it says stop, the weights of the previous
    check are restored and training ends (the experiment's stop is a quality guard on
    validation noise: Fréchet distance and diversity against the base, never the
    creator's hidden utility). `backtrack`: see `LastPassed`.

    `retries`: after a stop, the steps not kept are run again from the kept weights, at
    `retry_lr_scale` times the learning rate (a new seed, a fresh optimizer, checked the
    same way), up to `retries` times: a check that fails on distance alone often means
    a step too long for the quality bound, and a shorter one passes; a direction the
    check rejects is rejected again. The last record's `early_stop_kept`
    counts the steps kept over all attempts, `retries_used` the attempts after the first."""
    missing = sorted(set(cfg.weights) - set(rewards))
    if missing:
        raise ConfigError(
            f"flow_grpo.weights: unknown reward(s) {missing}; registered: {sorted(rewards)}"
        )
    use = {k: rewards[k] for k in cfg.weights}
    records = [{"prompt": i, "creators": creator} for i in range(len(verticals))]
    step = GRPOStep(
        FlowPolicy(verticals, tags, cfg.sde()),
        records,
        plugin_reward_fn(use, cfg.weights, context=dict(context or {}), call=cfg.reward_call),
        cfg.grpo(),
        ref_model=reference if cfg.beta > 0 else None,
    )
    if stop is None:  # the loop writes the weights back into `model`
        return train_loop(model, cfg.run(run_dir), step, name="grpo").history
    steps = cfg.train.steps
    guard = LastPassed(model, stop, check_every, steps, backtrack=backtrack)
    history = train_loop(model, cfg.run(run_dir), step, name="grpo", stop=guard).history
    history = guard.restore(model, history)
    if steps is None:  # no step count to run again
        return history
    kept, attempt = guard.kept_at if guard.stopped else steps, 0
    while guard.stopped and attempt < retries and kept < steps:
        attempt += 1
        cfg = cfg.model_copy(
            update={
                "optim": cfg.optim.model_copy(
                    update={"learning_rate": cfg.optim.learning_rate * retry_lr_scale}
                ),
                "train": cfg.train.model_copy(
                    update={"steps": steps - kept, "seed": cfg.train.seed + attempt}
                ),
            }
        )
        guard = LastPassed(model, stop, check_every, steps - kept, backtrack=backtrack)
        more = train_loop(model, cfg.run(run_dir), step, name=f"grpo-retry{attempt}", stop=guard)
        history += guard.restore(model, more.history)
        kept += guard.kept_at if guard.stopped else steps - kept
    if attempt:
        history[-1] = {
            **history[-1],
            "early_stop_kept": float(kept),
            "retries_used": float(attempt),
        }
    return history


class LastPassed:
    """Early stopping for both aligners, as `train_loop`'s `stop(step, model)`: `stop(model)`
    is asked every `check_every` steps and after the last; when it says stop, training
    ends and `restore` puts back the weights of the last check that passed (the base's if
    none did). `backtrack`: the steps since that check are first bisected for the latest one
    that passes (at most log2(check_every) more checks, only on a stop; each step's weights
    since the last check are held in memory for it)."""

    def __init__(
        self, model: Any, stop: Callable[[Any], bool], check_every: int, steps: int | None,
        *, backtrack: bool = False,
    ) -> None:  # fmt: skip
        self.stop, self.every, self.steps, self.backtrack = stop, check_every, steps, backtrack
        self.kept = jax.tree.map(jnp.array, nnx.state(model))
        self.kept_at = 0
        self.recent: dict[int, Any] = {}  # step -> weights since the last passed check
        self.stopped = False

    def __call__(self, s: int, current: nnx.Module) -> bool:
        at_check = s % self.every == 0 or s == self.steps
        if self.backtrack and not at_check:
            self.recent[s] = jax.tree.map(jnp.array, nnx.state(current))
        if not at_check:
            return False
        if not self.stop(current):
            self.kept = jax.tree.map(jnp.array, nnx.state(current))
            self.kept_at, self.recent = s, {}
            return False
        lo, hi = self.kept_at, s  # lo passed, hi failed
        while self.backtrack and hi - lo > 1:
            mid = (lo + hi) // 2
            nnx.update(current, self.recent[mid])
            if self.stop(current):
                hi = mid
            else:
                lo, self.kept = mid, self.recent[mid]
        self.kept_at, self.stopped = lo, True
        return True

    def restore(self, model: Any, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Put the kept weights into `model` after a stop; the history's last record says
        which step they are from (`early_stop_kept`)."""
        if self.stopped:
            nnx.update(model, self.kept)
            history[-1] = {**history[-1], "early_stop_kept": float(self.kept_at)}
        return history


class FlowDPOConfig(Strict):
    """`[flow_dpo]`: Diffusion-DPO steps, batch (pairs per step), beta, optimiser, and how
    often the experiment's quality stop is asked (`check_every`; None: never)."""

    steps: int = Field(100, ge=1)
    batch_size: int = Field(32, ge=1)
    beta: float = Field(2000.0, gt=0)
    learning_rate: float = Field(5e-5, gt=0)
    seed: int = 0
    # measured effect of 10 and 20 on validation seed 100: no creator within all goals (lumen
    # FD 1.41x or the base kept, noir win 0.72; docs/experiments/flow-unet-base-alignment.md)
    check_every: int | None = Field(None, ge=1)
    # anchors tried in order, each from the starting weights, until the experiment's quality
    # stop passes the trained model (`flow_dpo`); None: `anchor` alone. Measured effect of
    # [0, 2000, 8000] on evaluation seeds 0-2 (32x32): lumen win 0.90 -> 0.58 at FD 3.17x ->
    # 0.97x, noir unchanged (0.85, FD 1.44x) (docs/experiments/flow-dpo-velocity-anchor.md)
    anchor_ladder: list[float] | None = None
    # weight of the velocity anchor to the reference (`make_dpo_loss`); 0: plain Diffusion-DPO.
    # Measured effect of 2000 on validation seeds 101-102: lumen FD 3.30x / 2.60x -> 0.98x /
    # 1.28x at the same win, noir win 0.74 / 0.85 -> 0.55 / 0.58
    # (docs/experiments/flow-dpo-velocity-anchor.md)
    anchor: float = Field(0.0, ge=0)

    @model_validator(mode="after")
    def _one_stop(self) -> FlowDPOConfig:
        if self.anchor_ladder is not None and self.check_every is not None:
            raise ValueError("anchor_ladder and check_every: choose one way to stop")
        if self.anchor_ladder is not None and (
            not self.anchor_ladder or min(self.anchor_ladder) < 0
        ):
            raise ValueError("anchor_ladder: one or more weights >= 0")
        return self


def dpo_pairs(
    candidates: np.ndarray, picks: np.ndarray, verticals: np.ndarray, tags: np.ndarray
) -> dict[str, np.ndarray]:
    """Pairs from selections: `candidates` [E, K, H, W, 3] (model space), `picks` [E]
    (chosen index), conditions per event; chosen ≻ each of the K-1 others."""
    xw, xl, v, t = [], [], [], []
    for e in range(len(candidates)):
        for j in range(candidates.shape[1]):
            if j != picks[e]:
                xw.append(candidates[e, picks[e]])
                xl.append(candidates[e, j])
                v.append(verticals[e])
                t.append(tags[e])
    return {"xw": np.stack(xw), "xl": np.stack(xl), "vertical": np.asarray(v, np.int32),
            "tags": np.stack(t).astype(np.float32)}  # fmt: skip


class DPOBatches:
    """Step-indexed Diffusion-DPO batches; both images of a pair share t and noise."""

    def __init__(self, pairs: dict[str, np.ndarray], batch_size: int, seed: int) -> None:
        self.pairs, self.batch_size, self.seed = pairs, batch_size, seed
        self.n = len(pairs["xw"])

    def __call__(self, step: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng([self.seed, step])
        idx = rng.integers(0, self.n, self.batch_size)
        b = {k: v[idx] for k, v in self.pairs.items()}
        b["noise"] = rng.standard_normal(b["xw"].shape).astype(np.float32)
        b["t"] = rng.uniform(0.0, 1.0, self.batch_size).astype(np.float32)
        return b


def make_dpo_loss(reference: Any, *, beta: float, anchor: float = 0.0) -> Any:
    """`train_loop` loss for Diffusion-DPO against the frozen `reference`; `anchor` > 0
    adds that weight times the velocity anchor to the reference (`velocity_anchor`,
    averaged over both images of each pair) to the loss, reported as `anchor`."""
    ref_graphdef, ref_state = nnx.split(reference)

    def velocities(m: Any, batch: Mapping[str, jax.Array]) -> list[jax.Array]:
        return [
            m(interpolate(batch[k], batch["noise"], batch["t"]), batch["t"],
              batch["vertical"], batch["tags"])
            for k in ("xw", "xl")
        ]  # fmt: skip

    def errors(vs: list[jax.Array], batch: Mapping[str, jax.Array]) -> list[jax.Array]:
        return [velocity_error(vs[0], batch["xw"], batch["noise"]),
                velocity_error(vs[1], batch["xl"], batch["noise"])]  # fmt: skip

    def loss_fn(model: Any, batch: Mapping[str, jax.Array]) -> tuple[jax.Array, dict]:
        ref_v = jax.lax.stop_gradient(velocities(nnx.merge(ref_graphdef, ref_state), batch))
        vs = velocities(model, batch)
        (ew, el), (rw, rl) = errors(vs, batch), errors(ref_v, batch)
        loss, metrics = diffusion_dpo_loss(ew, el, rw, rl, beta=beta)
        if anchor > 0:
            drift = 0.5 * (velocity_anchor(vs[0], ref_v[0]) + velocity_anchor(vs[1], ref_v[1]))
            metrics["anchor"] = drift.mean()
            loss = loss + anchor * metrics["anchor"]
            metrics["loss"] = loss
        return loss, metrics

    return loss_fn


def flow_dpo(
    model: Any, reference: Any, pairs: dict[str, np.ndarray], cfg: FlowDPOConfig,
    *, run_dir: str | Path, stop: Callable[[Any], bool] | None = None,
) -> TrainResult:  # fmt: skip
    """Diffusion-DPO of `model` in place against `reference` through `train_loop`;
    `stop(model)` (early stopping, as in `flow_grpo`) is asked every `cfg.check_every`
    steps, and a stop keeps the last weights that passed (`LastPassed`).

    With `cfg.anchor_ladder` and a `stop`, each anchor weight in turn trains from the
    starting weights and `stop` judges the result once; the first that passes is kept,
    and if none does the starting weights are (the last record's `anchor_kept` says
    which, -1 for none)."""
    if cfg.anchor_ladder is not None and stop is not None:
        start = jax.tree.map(jnp.copy, nnx.state(model))
        for w in cfg.anchor_ladder:
            nnx.update(model, jax.tree.map(jnp.copy, start))  # training donates the buffers
            rung = cfg.model_copy(update={"anchor": w, "anchor_ladder": None})
            res = flow_dpo(model, reference, pairs, rung, run_dir=Path(run_dir) / f"anchor{w:g}")
            if not stop(model):
                res.history[-1] = {**res.history[-1], "anchor_kept": w}
                return res
        nnx.update(model, start)
        res.history[-1] = {**res.history[-1], "anchor_kept": -1.0}
        return res
    run = TrainRunConfig.model_validate(
        {
            "run_dir": Path(run_dir),
            "train": {
                "steps": cfg.steps,
                "batch_size": cfg.batch_size,
                "seed": cfg.seed,
                "log_every": max(1, cfg.steps // 10),
                "progress": False,
                "metrics_hook": False,
            },
            "optim": {"name": "adam", "learning_rate": cfg.learning_rate, "decay": "constant"},
            "checkpoint": {"every": 0, "keep": 1, "resume": False},
        }
    )
    batches = DPOBatches(pairs, cfg.batch_size, cfg.seed)
    loss_fn = make_dpo_loss(reference, beta=cfg.beta, anchor=cfg.anchor)
    if stop is None or cfg.check_every is None:
        return train_loop(model, run, supervised(loss_fn, batches), name="flow_dpo")
    guard = LastPassed(model, stop, cfg.check_every, cfg.steps)
    res = train_loop(model, run, supervised(loss_fn, batches), name="flow_dpo", stop=guard)
    guard.restore(model, res.history)
    return res
