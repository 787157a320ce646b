"""GRPO rollouts: the sampler compiles once inside the trainer; overlapped (async) rollout
runs on an 8-device mesh and learns the toy task as well as synchronous rollout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pytest
from flax import nnx

from studio_align.generation import compiles
from studio_align.generation.sampler import Sampler
from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer
from studio_align.testing import toy
from studio_align.training.grpo import GRPOConfig, GRPOStep, plugin_reward_fn
from studio_align.training.loop import TrainResult, train_loop
from studio_align.training.optim import OptimConfig
from studio_align.training.policy import LMPolicy

sys.path.insert(0, str(Path(__file__).parent))
from test_training_grpo import TARGET, Table, TablePolicy, curve, run_config

# minutes of CPU in subprocesses or training runs: opt-in (`pytest -m slow`), so the
# default suite stays under 15 minutes on 2 cores
pytestmark = pytest.mark.slow


def _lm(steps: int, slots: int = 0, **cfg: object) -> tuple[GRPOStep, TrainResult, Transformer]:
    """`steps` GRPO steps of the tiny LM on the answer task; the step, result and model."""
    pol = LMPolicy(max_prompt_len=4, max_new_tokens=4, pad_id=toy.PAD, eos_id=toy.EOS, slots=slots)
    gcfg = GRPOConfig(**{"prompts_per_step": 4, "group_size": 4, "beta": 0.1, **cfg})  # type: ignore[arg-type]
    model = Transformer(ModelConfig.tiny(toy.VOCAB), rngs=nnx.Rngs(0))
    ref = Transformer(ModelConfig.tiny(toy.VOCAB), rngs=nnx.Rngs(0))
    step = GRPOStep(pol, toy.answer_prompts(), plugin_reward_fn([toy.answer_reward]), gcfg,
                    ref_model=ref)  # fmt: skip
    run = run_config(steps, optim=OptimConfig(learning_rate=1e-2, decay="constant"))
    return step, train_loop(model, run, step, name="grpo"), model


def test_sampler_compiles_once_inside_the_trainer() -> None:
    """The loop's parameters carry its mesh sharding; the sampler must not compile a
    second program for them (it used to: a fresh cache vs the sharded one handed back)."""
    counts: list[int] = []
    pol = LMPolicy(max_prompt_len=4, max_new_tokens=4, pad_id=toy.PAD, eos_id=toy.EOS)
    model = Transformer(ModelConfig.tiny(toy.VOCAB), rngs=nnx.Rngs(0))
    counter = Sampler(model)
    before = counter.compile_count
    step = GRPOStep(pol, toy.answer_prompts(), plugin_reward_fn([toy.answer_reward]),
                    GRPOConfig(prompts_per_step=4, group_size=4))  # fmt: skip
    res = train_loop(model, run_config(3, optim=OptimConfig(learning_rate=1e-2)), step,
                     name="grpo", stop=lambda s, m: counts.append(counter.compile_count) or False)  # fmt: skip
    assert counts[0] - before <= 1
    assert counts[-1] == counts[0]
    assert res.compiles == 1


def test_continuous_batching_rollouts_train_with_one_compile() -> None:
    """`LMPolicy(slots=6)`: 16 rollout rows decoded 6 at a time inside the loop; the
    sampler compiles once, the update once, and the rollouts end at EOS or the limit."""
    compiles.install()

    def continuous() -> int:  # XLA programs built for the continuous decode loop
        return sum(n for k, n in compiles.by_program().items() if "generate_continuous" in k)

    before = continuous()
    t, res, model = _lm(3, slots=6)
    assert continuous() == before + 1  # the rollouts took the continuous path, compiled once
    assert res.compiles == 1
    assert all(np.isfinite(x["loss"]) for x in res.history)
    roll = t.policy.sample(model, [[1, 2], [1, 3]], 4, jax.random.key(0))
    assert roll.mask.shape == (8, 4) and roll.lengths.min() >= 1


def test_async_rollout_lm_runs_and_is_bounded() -> None:
    t, res, _ = _lm(4, async_rollout=True)
    h = res.history
    assert [x["step"] for x in h] == [1, 2, 3, 4]
    assert h[0]["rollout/staleness"] == 0.0
    assert all(x["rollout/staleness"] <= 1.0 for x in h)
    assert max(x["rollout/staleness"] for x in h) == 1.0
    assert all(np.isfinite(x["loss"]) for x in h)
    assert res.compiles == 1 and t.rollouts._pool is None  # the worker is gone after the run


@pytest.mark.parametrize("mu", [1, 2])
def test_async_rollout_decoupled_correction(mu: int) -> None:
    """Decoupled PPO on stale rollouts: with one update per step the proximal log-probs are
    the update's own forward; with several, one extra pass per stale step computes them.
    Either way one compiled update, and the behaviour weights are logged (1 when fresh)."""
    _, res, _ = _lm(4, async_rollout=True, mu=mu)
    h = res.history
    assert res.compiles == 1
    assert h[0]["rollout/staleness"] == 0.0 and h[0]["is_weight/mean"] == pytest.approx(1.0)
    stale = [x for x in h if x["rollout/staleness"] == 1.0]
    assert stale and all(0.0 < x["is_weight/mean"] <= 5.0 for x in stale)
    assert all(np.isfinite(x["loss"]) for x in h)
    _, clip, _ = _lm(4, async_rollout=True, mu=mu, async_correction="clip")
    assert all("is_weight/mean" not in x for x in clip.history)


def _table_run(async_rollout: bool, mesh: dict | None) -> list[float]:
    """Reward curve of the table-policy pattern task (tests/test_training_grpo.py)."""
    cfg = GRPOConfig(prompts_per_step=4, group_size=8, mu=2, minibatches=2, beta=0.05,
                     async_rollout=async_rollout)  # fmt: skip
    step = GRPOStep(TablePolicy(4), [0, 1, 2, 3], plugin_reward_fn([toy.pattern_reward(TARGET)]),
                    cfg, ref_model=Table(4, 8, rngs=nnx.Rngs(0)))  # fmt: skip
    result = train_loop(Table(4, 8, rngs=nnx.Rngs(0)), run_config(15, mesh=mesh), step, name="grpo")
    assert result.compiles == 1
    return curve(result)


def test_async_rollout_on_8_devices_learns_like_sync() -> None:
    """Sync and async on a (data 4, fsdp 2) mesh of 8 CPU devices, same seeds: async
    learns the toy task, and its final reward is not worse than sync's."""
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
        "JAX_PLATFORMS": "cpu",
    }
    code = (
        "import sys, json; sys.path.insert(0, 'tests'); import test_grpo_rollout as t; "
        "m = {'data': 4, 'fsdp': 2, 'min_shard_size': 0}; "
        "print('RESULT', json.dumps([t._table_run(False, m), t._table_run(True, m)]))"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-2000:]
    sync, asyn = json.loads(out.stdout.split("RESULT", 1)[1])
    end_sync, end_async = np.mean(sync[-3:]), np.mean(asyn[-3:])
    print(f"final reward: sync {end_sync:.3f}, async {end_async:.3f}")
    assert end_async > np.mean(asyn[:2]) + 0.3  # it learns
    assert end_async >= end_sync - 0.05  # and not worse than on-policy rollouts


def test_async_rollout_checkpoints_and_resumes(tmp_path) -> None:
    """A checkpoint taken while the next rollout is in flight holds the sampling state
    from before that rollout was requested: the resumed run redraws it and carries on."""
    import shutil

    from studio_align.training.checkpoint import CheckpointConfig

    restored: list[dict] = []

    def run(steps: int, run_dir: Path) -> tuple[GRPOStep, TrainResult]:
        cfg = GRPOConfig(prompts_per_step=2, group_size=4, async_rollout=True)
        step = GRPOStep(TablePolicy(4), [0, 1, 2, 3, 4],
                        plugin_reward_fn([toy.pattern_reward(TARGET)]), cfg)  # fmt: skip
        restore = step.restore
        step.restore = lambda rec: restored.append(dict(rec)) or restore(rec)  # type: ignore[method-assign]
        ck = CheckpointConfig(every=1, keep=5, async_save=False)
        res = train_loop(Table(4, 8, rngs=nnx.Rngs(0)),
                         run_config(steps, seed=3, run_dir=run_dir, checkpoint=ck), step, name="grpo")  # fmt: skip
        return step, res

    two, _ = run(2, tmp_path / "two")  # stops after step 2: nothing sampled ahead
    run(4, tmp_path / "four")  # step 2 is saved while rollout 3 is in flight
    shutil.rmtree(tmp_path / "four" / "checkpoints" / "3")
    shutil.rmtree(tmp_path / "four" / "checkpoints" / "4")
    _, res = run(4, tmp_path / "four")
    assert res.resumed_from == 2
    assert restored[-1]["rng"] == two.record(2)["rng"]
    assert restored[-1]["queue"] == two.record(2)["queue"]
    rest = res.history
    assert [h["step"] for h in rest] == [3, 4]
    assert rest[0]["rollout/staleness"] == 0.0  # the first rollout after a resume is on-policy


class _WherePolicy(TablePolicy):
    """The table policy, noting which devices the parameters it samples from live on."""

    def __init__(self, length: int):
        super().__init__(length)
        self.devices: set[int] = set()

    def sample(self, model: Table, prompts: Any, group_size: int, rng: jax.Array) -> Any:
        self.devices |= {d.id for d in model.logits[...].devices()}
        return super().sample(model, prompts, group_size, rng)


def _split_run(rollout_devices: int) -> dict:
    """The table task overlapped, sampling on the last `rollout_devices` of 8 devices."""
    cfg = GRPOConfig(prompts_per_step=4, group_size=8, mu=2, minibatches=2, beta=0.05,
                     async_rollout=True, rollout_devices=rollout_devices)  # fmt: skip
    policy = _WherePolicy(4)
    step = GRPOStep(policy, [0, 1, 2, 3], plugin_reward_fn([toy.pattern_reward(TARGET)]),
                    cfg, ref_model=Table(4, 8, rngs=nnx.Rngs(0)))  # fmt: skip
    trained: set[int] = set()

    def stop(s: int, model: nnx.Module) -> bool:
        trained.update(d.id for d in model.logits[...].devices())
        return False

    mesh = {"data": 8 - rollout_devices, "min_shard_size": 0}
    result = train_loop(Table(4, 8, rngs=nnx.Rngs(0)), run_config(15, mesh=mesh), step,
                        name="grpo", stop=stop)  # fmt: skip
    return {"curve": curve(result), "compiles": result.compiles,
            "trained_on": sorted(trained), "sampled_on": sorted(policy.devices)}  # fmt: skip


def test_split_device_rollout_on_8_devices_learns_and_keeps_apart(run_python_on_8_devices) -> None:
    """`rollout_devices = 4` on 8 CPU devices: the update's parameters live on devices
    0-3 only, every rollout samples from a copy on device 4, and the toy task is learned
    as with the same-device overlap (one compile of the update)."""
    out = run_python_on_8_devices(
        "import json, test_grpo_rollout as t; print('RESULT', json.dumps(t._split_run(4)))",
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.split("RESULT", 1)[1])
    assert res["trained_on"] == [0, 1, 2, 3]
    assert res["sampled_on"] == [4]
    assert res["compiles"] == 1
    c = res["curve"]
    print(f"split-device reward: start {np.mean(c[:2]):.3f}, end {np.mean(c[-3:]):.3f}")
    assert np.mean(c[-3:]) > np.mean(c[:2]) + 0.3  # it learns
