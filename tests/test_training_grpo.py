"""GRPO on the shared loop: dynamic sampling, overlong penalty, rising reward on verifiable
toy tasks, exact resume."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from studio_align.errors import ConfigError
from studio_align.testing import toy
from studio_align.training.checkpoint import CheckpointConfig
from studio_align.training.ema import ema_of
from studio_align.training.grpo import GRPOConfig, GRPOStep, plugin_reward_fn
from studio_align.training.grpo_rollout import Rollouts
from studio_align.training.loop import TrainConfig, TrainResult, TrainRunConfig, train_loop
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


def run_config(
    steps: int,
    *,
    seed: int = 0,
    optim: OptimConfig | None = None,
    run_dir=None,  # type: ignore[no-untyped-def]
    checkpoint: CheckpointConfig | None = None,
    mesh: dict | None = None,
) -> TrainRunConfig:
    """A GRPO test run: `steps` logged one by one, no checkpoints unless given."""
    from studio_align.models.sharding import MeshConfig

    return TrainRunConfig(
        run_dir=run_dir,
        train=TrainConfig(steps=steps, seed=seed, log_every=1, progress=False, metrics_hook=False),
        optim=optim or OptimConfig(learning_rate=0.3, decay="constant"),
        checkpoint=checkpoint or CheckpointConfig(enabled=False),
        mesh=MeshConfig(**mesh) if mesh else MeshConfig(),
    )


def curve(result: TrainResult, key: str = "reward/total/mean") -> list[float]:
    return [h[key] for h in result.history if key in h]


def _table_step(**overrides) -> GRPOStep:  # type: ignore[no-untyped-def]
    cfg = GRPOConfig(**{"prompts_per_step": 4, "group_size": 8, "mu": 2, **overrides})
    reward = plugin_reward_fn([toy.pattern_reward(TARGET)])
    return GRPOStep(TablePolicy(4), [0, 1, 2, 3], reward, cfg)


def test_grpo_core_raises_reward_on_table_policy() -> None:
    """Also `[optim] ema_decay`, which leaves training unchanged: the model handed back
    holds the moving average, the optimizer state the last update's weights."""
    optim = OptimConfig(learning_rate=0.3, decay="constant", clip_grad_norm=None, ema_decay=0.5)
    model = Table(4, 8, rngs=nnx.Rngs(0))
    seen = {}

    def keep_state(s: int, current: nnx.Module) -> bool:  # the loop's live arrays
        seen["logits"] = np.asarray(current.logits[...])
        return False

    result = train_loop(model, run_config(15, optim=optim), _table_step(), name="grpo",
                        stop=keep_state)  # fmt: skip
    exported = np.asarray(model.logits[...])
    np.testing.assert_allclose(exported, seen["logits"], rtol=1e-6)  # the EMA, both times
    start_model = np.asarray(Table(4, 8, rngs=nnx.Rngs(0)).logits[...])
    assert float(np.abs(exported - start_model).max()) > 1e-3
    c = curve(result)
    start, end = np.mean(c[:2]), np.mean(c[-2:])
    print(f"table policy reward {start:.3f} -> {end:.3f}")
    assert end > start + 0.3
    h = result.history[-1]
    for key in ("entropy", "clip_fraction", "zero_std_fraction", "reward/pattern/mean", "loss"):
        assert key in h, key
    assert result.compiles == 1 and result.step == 15 and len(result.history) == 15


def test_ema_export_differs_from_the_last_update() -> None:
    """With `ema_decay` the exported weights are the average, not the last update's."""
    from studio_align.training.ema import exported as export
    from studio_align.training.state import TrainState

    optim = OptimConfig(learning_rate=0.3, decay="constant", clip_grad_norm=None, ema_decay=0.5)
    states: list[TrainState] = []
    step = _table_step()
    bind = step.bind

    def spy(state: TrainState, run: TrainRunConfig, total: int) -> None:
        states.append(state)
        bind(state, run, total)

    step.bind = spy  # type: ignore[method-assign]
    train_loop(Table(4, 8, rngs=nnx.Rngs(0)), run_config(6, optim=optim), step, name="grpo")
    state = states[0]
    ema = ema_of(state.opt_state)
    assert ema is not None
    avg = export(state.params, state.opt_state)
    np.testing.assert_allclose(
        np.asarray(avg["logits"][...]), np.asarray(ema["logits"][...]), rtol=1e-6
    )
    diff = np.abs(np.asarray(ema["logits"][...]) - np.asarray(state.params["logits"][...]))
    assert float(diff.max()) > 1e-3


def test_kl_to_reference_is_logged_and_restrains() -> None:
    cfg = GRPOConfig(prompts_per_step=4, group_size=8, beta=0.5)
    step = GRPOStep(TablePolicy(4), [0, 1, 2, 3], plugin_reward_fn([toy.pattern_reward(TARGET)]),
                    cfg, ref_model=Table(4, 8, rngs=nnx.Rngs(0)))  # fmt: skip
    h = train_loop(Table(4, 8, rngs=nnx.Rngs(0)), run_config(8), step, name="grpo").history
    assert h[0]["kl"] == pytest.approx(0.0, abs=1e-6) and h[-1]["kl"] > 0


def test_old_grpo_steps_key_says_where_it_moved() -> None:
    from studio_align.config import validate
    from studio_align.training.grpo_run import GRPORunConfig

    with pytest.raises(ConfigError, match=r"grpo: `steps` moved to the shared \[train\] section"):
        validate(GRPORunConfig, {"grpo": {"steps": 50}}, source="old.toml")
    with pytest.raises(ConfigError, match=r"train\.batch_size does not apply to GRPO"):
        validate(GRPORunConfig, {"train": {"batch_size": 8}})
    given = validate(GRPORunConfig, {"train": {"steps": 50}}).train
    assert given.steps == 50 and given.log_every == 1  # GRPO's own default survives


def test_split_rollout_devices_are_checked() -> None:
    """`rollout_devices` is for the overlapped rollout, and must leave a device to train on."""
    with pytest.raises(ValueError, match="rollout_devices = 1 needs async_rollout = true"):
        GRPOConfig(rollout_devices=1)
    n = len(jax.local_devices())
    cfg = GRPOConfig(async_rollout=True, rollout_devices=n)
    step = GRPOStep(TablePolicy(4), [0, 1], plugin_reward_fn([toy.pattern_reward(TARGET)]), cfg)
    with pytest.raises(ConfigError, match=f"rollout_devices={n} leaves no device"):
        step.devices  # noqa: B018 (the property is the check train_loop makes)
    assert GRPOStep(TablePolicy(4), [0], plugin_reward_fn([toy.pattern_reward(TARGET)]),
                    GRPOConfig()).devices is None  # fmt: skip


def test_dynamic_sampling_refills_zero_variance_groups() -> None:
    calls = []

    def constant_for_even(completions, prompts):  # type: ignore[no-untyped-def]
        calls.append(len(prompts))
        # groups for even prompts always score 1 (zero variance); odd prompts vary
        return [
            1.0 if p % 2 == 0 else float(c[0] % 2)
            for c, p in zip(completions, prompts, strict=True)
        ]

    cfg = GRPOConfig(prompts_per_step=4, group_size=8, max_resample=3)
    model = Table(4, 8, rngs=nnx.Rngs(0))
    t = Rollouts(TablePolicy(4), list(range(8)), plugin_reward_fn([constant_for_even]), cfg, seed=0)
    rollout, rewards, metrics = t.collect(model)
    groups = rewards.reshape(-1, 8)
    assert metrics["zero_std_fraction"] == pytest.approx(0.5, abs=0.5)
    assert metrics["rollouts"] > 1  # half the prompts are uninformative: a refill was needed
    assert (groups.max(1) > groups.min(1)).all()  # every kept group has signal
    assert len(rollout) == 32
    off = Rollouts(
        TablePolicy(4),
        list(range(8)),
        plugin_reward_fn([constant_for_even]),
        cfg.model_copy(update={"dynamic_sampling": False}),
        seed=0,
    )
    _, _, m2 = off.collect(model)
    assert m2["rollouts"] == 1.0


def test_overlong_penalty_counts_tokens() -> None:
    cfg = GRPOConfig(
        prompts_per_step=2,
        group_size=4,
        overlong_penalty=1.0,
        overlong_buffer=2,
        dynamic_sampling=False,
    )
    t = Rollouts(
        TablePolicy(4, eos=2),
        [0, 1],
        plugin_reward_fn([lambda completions: [0.0] * len(completions)]),
        cfg,
        seed=0,
    )
    rollout, rewards, _ = t.collect(Table(4, 8, rngs=nnx.Rngs(0)))
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
    cfg = GRPOConfig(prompts_per_step=4, group_size=8, mu=2)
    step = GRPOStep(pol, toy.answer_prompts(), plugin_reward_fn([toy.answer_reward]), cfg)
    optim = OptimConfig(learning_rate=lr, decay="constant")
    result = train_loop(_lm(), run_config(steps, optim=optim), step, name="grpo")
    assert result.compiles == 1
    return curve(result)


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
    cfg = GRPOConfig(prompts_per_step=4, group_size=8, mu=2, minibatches=2, beta=0.1)
    reward = plugin_reward_fn([toy.pattern_reward(TARGET)])
    step = GRPOStep(TablePolicy(4), [0, 1, 2, 3], reward, cfg,
                    ref_model=Table(4, 8, rngs=nnx.Rngs(0)))  # fmt: skip
    result = train_loop(
        Table(4, 8, rngs=nnx.Rngs(0)), run_config(steps, mesh=mesh), step, name="grpo"
    )
    return [[h["loss"], h["reward/total/mean"], h["kl"]] for h in result.history]


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
    models: dict[str, Table] = {}

    def run(steps: int, name: str) -> TrainResult:
        cfg = GRPOConfig(prompts_per_step=2, group_size=4, mu=2, minibatches=2)
        step = GRPOStep(TablePolicy(4), [0, 1, 2, 3, 4],
                        plugin_reward_fn([toy.pattern_reward(TARGET)]), cfg)  # fmt: skip
        models[name] = Table(4, 8, rngs=nnx.Rngs(0))
        ck = CheckpointConfig(every=1, keep=2, async_save=False)
        return train_loop(models[name], run_config(steps, seed=3, run_dir=tmp_path / name,
                                                   checkpoint=ck), step, name="grpo")  # fmt: skip

    full = run(4, "a").history
    run(2, "b")
    resumed = run(4, "b")
    assert resumed.resumed_from == 2
    rest = resumed.history
    assert [h["step"] for h in rest] == [3, 4]
    for a, b in zip(full[2:], rest, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-6, abs=1e-7)
        assert a["reward/total/mean"] == b["reward/total/mean"]
    for x, y in zip(
        jax.tree.leaves(nnx.state(models["a"])),
        jax.tree.leaves(nnx.state(models["b"])),
        strict=True,
    ):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6)
    lines = (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 4
