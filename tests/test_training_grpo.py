"""GRPO trainer: dynamic sampling, overlong penalty, rising reward on verifiable toy tasks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from studio_align.testing import toy
from studio_align.training.ema import ema_of
from studio_align.training.grpo import GRPOConfig, GRPOTrainer, plugin_reward_fn
from studio_align.training.optim import OptimConfig
from studio_align.training.policy import Rollout, replay_fsm


class Table(nnx.Module):
    """Context-free per-position logits: the smallest trainable token policy."""

    def __init__(self, length: int, vocab: int, *, rngs: nnx.Rngs):
        self.logits = nnx.Param(0.01 * jax.random.normal(rngs.params(), (length, vocab)))


class TablePolicy:
    """A non-LM `Policy`: proves the protocol is all GRPO needs."""

    def __init__(self, length: int, eos: int | None = None):
        self.length, self.eos = length, eos

    def sample(self, model: Table, prompts: Sequence, group_size: int, rng: jax.Array) -> Rollout:
        n = len(prompts) * group_size
        logp = jax.nn.log_softmax(model.logits[...])
        tok = np.asarray(jax.random.categorical(rng, logp, shape=(n, self.length)))
        old = np.asarray(logp[jnp.arange(self.length), tok])
        lengths = np.full(n, self.length)
        if self.eos is not None:  # stop at the first eos
            hit = tok == self.eos
            lengths = np.where(hit.any(1), hit.argmax(1) + 1, self.length)
        mask = np.arange(self.length)[None] < lengths[:, None]
        truncated = ~(np.take_along_axis(tok, (lengths - 1)[:, None], 1)[:, 0] == self.eos)
        return Rollout(
            batch={"tokens": tok, "mask": mask},
            old_logps=np.where(mask, old, 0.0).astype(np.float32),
            mask=mask,
            lengths=lengths,
            truncated=truncated,
            columns={"completions": [t[m].tolist() for t, m in zip(tok, mask, strict=True)]},
        )

    def logps(self, model: Table, batch: Mapping[str, jax.Array]):  # type: ignore[no-untyped-def]
        logp = jax.nn.log_softmax(model.logits[...])
        lp = logp[jnp.arange(self.length)[None], batch["tokens"]]
        ent = -jnp.sum(jnp.exp(logp) * logp, -1)
        mask = batch["mask"]
        return jnp.where(mask, lp, 0.0), mask, jnp.broadcast_to(ent, lp.shape)


TARGET = [5, 6, 5, 6]


def _trainer(optim: OptimConfig | None = None, **overrides) -> GRPOTrainer:  # type: ignore[no-untyped-def]
    cfg = GRPOConfig(
        **{"steps": 15, "prompts_per_step": 4, "group_size": 8, "mu": 2, "seed": 0, **overrides}
    )
    model = Table(4, 8, rngs=nnx.Rngs(0))
    reward = plugin_reward_fn([toy.pattern_reward(TARGET)])
    optim = optim or OptimConfig(learning_rate=0.3, decay="constant", clip_grad_norm=None)
    return GRPOTrainer(TablePolicy(4), model, [0, 1, 2, 3], reward, cfg, optim)


def test_grpo_core_raises_reward_on_table_policy() -> None:
    """Also `[optim] ema_decay`, which leaves training unchanged: the trainer's model ends
    on the moving average, its own state on the last update's weights."""
    optim = OptimConfig(learning_rate=0.3, decay="constant", clip_grad_norm=None, ema_decay=0.5)
    trainer = _trainer(optim)
    result = trainer.train()
    ema = ema_of(trainer.opt_state)
    assert ema is not None
    exported = np.asarray(trainer.model.logits[...])
    np.testing.assert_allclose(exported, np.asarray(ema["logits"][...]), rtol=1e-6)
    assert float(np.abs(exported - np.asarray(trainer.params["logits"][...])).max()) > 1e-3
    curve = result.curve()
    start, end = np.mean(curve[:2]), np.mean(curve[-2:])
    print(f"table policy reward {start:.3f} -> {end:.3f}")
    assert end > start + 0.3
    h = result.history[-1]
    for key in ("entropy", "clip_fraction", "zero_std_fraction", "reward/pattern/mean", "loss"):
        assert key in h, key
    assert result.compiles == 1


def test_kl_to_reference_is_logged_and_restrains() -> None:
    ref = Table(4, 8, rngs=nnx.Rngs(0))
    cfg = GRPOConfig(steps=8, prompts_per_step=4, group_size=8, beta=0.5, seed=0)
    model = Table(4, 8, rngs=nnx.Rngs(0))
    t = GRPOTrainer(
        TablePolicy(4),
        model,
        [0, 1, 2, 3],
        plugin_reward_fn([toy.pattern_reward(TARGET)]),
        cfg,
        OptimConfig(learning_rate=0.3, decay="constant"),
        ref_model=ref,
    )
    h = t.train().history
    assert h[0]["kl"] == pytest.approx(0.0, abs=1e-6) and h[-1]["kl"] > 0


def test_dynamic_sampling_refills_zero_variance_groups() -> None:
    calls = []

    def constant_for_even(completions, prompts):  # type: ignore[no-untyped-def]
        calls.append(len(prompts))
        # groups for even prompts always score 1 (zero variance); odd prompts vary
        return [
            1.0 if p % 2 == 0 else float(c[0] % 2)
            for c, p in zip(completions, prompts, strict=True)
        ]

    cfg = GRPOConfig(steps=1, prompts_per_step=4, group_size=8, seed=0, max_resample=3)
    t = GRPOTrainer(
        TablePolicy(4),
        Table(4, 8, rngs=nnx.Rngs(0)),
        list(range(8)),
        plugin_reward_fn([constant_for_even]),
        cfg,
        OptimConfig(),
    )
    rollout, rewards, metrics = t.collect()
    groups = rewards.reshape(-1, 8)
    assert metrics["zero_std_fraction"] == pytest.approx(0.5, abs=0.5)
    assert metrics["rollouts"] > 1  # half the prompts are uninformative: a refill was needed
    assert (groups.max(1) > groups.min(1)).all()  # every kept group has signal
    assert len(rollout) == 32
    off = GRPOTrainer(
        TablePolicy(4),
        Table(4, 8, rngs=nnx.Rngs(0)),
        list(range(8)),
        plugin_reward_fn([constant_for_even]),
        cfg.model_copy(update={"dynamic_sampling": False}),
        OptimConfig(),
    )
    _, _, m2 = off.collect()
    assert m2["rollouts"] == 1.0


def test_overlong_penalty_counts_tokens() -> None:
    cfg = GRPOConfig(
        steps=1,
        prompts_per_step=2,
        group_size=4,
        overlong_penalty=1.0,
        overlong_buffer=2,
        dynamic_sampling=False,
    )
    t = GRPOTrainer(
        TablePolicy(4, eos=2),
        Table(4, 8, rngs=nnx.Rngs(0)),
        [0, 1],
        plugin_reward_fn([lambda completions: [0.0] * len(completions)]),
        cfg,
        OptimConfig(),
    )
    rollout, rewards, _ = t.collect()
    for r, length, trunc in zip(rewards, rollout.lengths, rollout.truncated, strict=True):
        want = -1.0 if trunc else (0.0 if length <= 2 else -(length - 2) / 2)
        assert r == pytest.approx(want)


def test_replay_fsm() -> None:
    nxt = np.array([[1, 2], [2, 2], [2, 2]], np.int32)
    states = replay_fsm(np.array([[0, 1, 1], [1, 0, 0]]), np.array([0, 0]), nxt)
    assert states.tolist() == [[0, 1, 2], [0, 2, 2]]


# --- the engine's LM as a policy -------------------------------------------------------------

from studio_align.generation.constraint import FSMConstraint  # noqa: E402
from studio_align.models.config import ModelConfig  # noqa: E402
from studio_align.models.transformer import Transformer  # noqa: E402
from studio_align.training.policy import LMPolicy  # noqa: E402

PROMPTS = [[toy.BOS], [toy.BOS, 4], [toy.BOS, 5, 9], [toy.BOS, 6]]


def _lm() -> Transformer:
    return Transformer(ModelConfig.tiny(toy.VOCAB), rngs=nnx.Rngs(0))


@pytest.mark.parametrize("constrained", [False, True])
def test_lm_policy_logps_match_sampler(constrained: bool) -> None:
    """Training-time log-probs equal the sampler's: the first GRPO pass is on-policy."""
    constraint_for = None
    if constrained:  # state 0 allows {5, 6}; state 1 allows {7, eos}; state 2 is done
        allowed = np.zeros((3, toy.VOCAB), bool)
        allowed[0, [5, 6]] = True
        allowed[1, [7, toy.EOS]] = True
        nxt = np.full((3, toy.VOCAB), 2, np.int32)
        nxt[0, [5, 6]] = 1
        nxt[1, 7] = 0

        def constraint_for(rows):  # type: ignore[no-untyped-def]
            return FSMConstraint(allowed, nxt, np.zeros(len(rows), np.int32))

    model = _lm()
    pol = LMPolicy(
        max_prompt_len=4,
        max_new_tokens=5,
        pad_id=toy.PAD,
        eos_id=toy.EOS,
        constraint_for=constraint_for,
    )
    ro = pol.sample(model, PROMPTS, 3, jax.random.key(1))
    assert ro.old_logps.shape == ro.mask.shape == (12, 5)
    lp, mask, ent = jax.jit(pol.logps)(model, {k: jnp.asarray(v) for k, v in ro.batch.items()})
    np.testing.assert_allclose(np.asarray(lp), ro.old_logps, atol=2e-4)
    assert np.asarray(mask).tolist() == ro.mask.tolist()
    assert bool(jnp.all(ent >= 0))
    if constrained:
        for c in ro.columns["completions"]:
            assert all(x in (5, 6, 7, toy.EOS) for x in c)


def _lm_grpo(steps: int, lr: float) -> list[float]:
    """The answer task: `<bos> a b` -> `[ANSWER0 + a, <eos>]`, a prompt-conditioned pattern."""
    pol = LMPolicy(max_prompt_len=4, max_new_tokens=4, pad_id=toy.PAD, eos_id=toy.EOS)
    cfg = GRPOConfig(steps=steps, prompts_per_step=4, group_size=8, mu=2, seed=0)
    reward = plugin_reward_fn([toy.answer_reward])
    t = GRPOTrainer(
        pol, _lm(), toy.answer_prompts(), reward, cfg,
        OptimConfig(learning_rate=lr, decay="constant"),
    )  # fmt: skip
    result = t.train()
    assert result.compiles == 1
    return result.curve()


def test_lm_grpo_reward_rises_fast() -> None:
    curve = _lm_grpo(12, 1e-2)
    start, end = np.mean(curve[:2]), np.mean(curve[-3:])
    print(f"LM GRPO (12 steps) reward {start:.3f} -> {end:.3f}")
    assert end > start + 0.15


@pytest.mark.slow
def test_lm_grpo_reward_rises_long() -> None:
    # a gentler learning rate than the fast test: at 1e-2 some prompts can collapse onto a
    # half-right answer (entropy ~0, every group zero-variance) before they are learnt
    curve = _lm_grpo(40, 5e-3)
    start, end = np.mean(curve[:2]), np.mean(curve[-5:])
    print(f"LM GRPO (40 steps) reward {start:.3f} -> {end:.3f}")
    assert start < 0.15 and end > 0.6


def _table_history(mesh: dict | None = None, steps: int = 3) -> list[list[float]]:
    """(loss, reward) per step of a short table-policy run, on the given mesh."""
    from studio_align.models.sharding import MeshConfig

    cfg = GRPOConfig(
        steps=steps, prompts_per_step=4, group_size=8, mu=2, minibatches=2, seed=0, beta=0.1
    )
    reward = plugin_reward_fn([toy.pattern_reward(TARGET)])
    t = GRPOTrainer(
        TablePolicy(4), Table(4, 8, rngs=nnx.Rngs(0)), [0, 1, 2, 3], reward, cfg,
        OptimConfig(learning_rate=0.3, decay="constant"), ref_model=Table(4, 8, rngs=nnx.Rngs(0)),
        mesh=MeshConfig(**mesh) if mesh else None,
    )  # fmt: skip
    return [[h["loss"], h["reward/total/mean"], h["kl"]] for h in t.train().history]


@pytest.mark.slow  # over 10 s; the default suite stays under 15 minutes on 2 cores
def test_grpo_on_8_devices_matches_1_device(run_python_on_8_devices) -> None:
    """Same run on a (data 4, fsdp 2) mesh of 8 forced CPU devices: same losses."""
    import json

    one = _table_history()
    code = (
        "import json, test_training_grpo as t; "
        "print('RESULT', json.dumps(t._table_history({'data': 4, 'fsdp': 2, 'min_shard_size': 0})))"
    )
    out = run_python_on_8_devices(code)
    assert out.returncode == 0, out.stderr[-2000:]
    eight = json.loads(out.stdout.split("RESULT", 1)[1])
    np.testing.assert_allclose(np.array(eight), np.array(one), rtol=1e-4, atol=1e-5)


def test_grpo_checkpoint_resume_is_exact(tmp_path) -> None:
    """2 steps, stop, resume to 4 == 4 steps straight (params, losses, rollouts)."""
    from studio_align.training.checkpoint import CheckpointConfig

    def trainer(steps: int, run_dir) -> GRPOTrainer:  # type: ignore[no-untyped-def]
        cfg = GRPOConfig(steps=steps, prompts_per_step=2, group_size=4, mu=2, minibatches=2, seed=3)
        return GRPOTrainer(
            TablePolicy(4), Table(4, 8, rngs=nnx.Rngs(0)), [0, 1, 2, 3, 4],
            plugin_reward_fn([toy.pattern_reward(TARGET)]), cfg,
            OptimConfig(learning_rate=0.3, decay="constant"), run_dir=run_dir,
            checkpoint=CheckpointConfig(every=1, keep=2, async_save=False),
        )  # fmt: skip

    straight = trainer(4, tmp_path / "a")
    full = straight.train().history
    trainer(2, tmp_path / "b").train()
    resumed = trainer(4, tmp_path / "b")
    assert resumed.step_count == 2
    rest = resumed.train().history
    assert [h["step"] for h in rest] == [3, 4]
    for a, b in zip(full[2:], rest, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-6, abs=1e-7)
        assert a["reward/total/mean"] == b["reward/total/mean"]
    for x, y in zip(jax.tree.leaves(straight.params), jax.tree.leaves(resumed.params), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6)
    lines = (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 4
