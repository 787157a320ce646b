"""PPO on the shared train loop: the toy answer task, one compile, the KL controller's
state across a resume, the value head's trainable filter, config checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from flax import nnx

from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer
from studio_align.testing import toy
from studio_align.training.grpo_config import plugin_reward_fn
from studio_align.training.loop import train_loop
from studio_align.training.policy import LMPolicy
from studio_align.training.ppo import PPOConfig, PPOExperience, PPORunConfig, make_ppo_loss
from studio_align.training.supervised import supervised
from studio_align.training.value_head import ValueModel, trainable


def _run(tmp: Path, *, rollouts: int, seed: int = 0, shared: bool = True, **ppo: object):
    pol = LMPolicy(max_prompt_len=4, max_new_tokens=4, pad_id=toy.PAD, eos_id=toy.EOS)
    model = Transformer(ModelConfig.tiny(toy.VOCAB), rngs=nnx.Rngs(seed))
    ref = Transformer(ModelConfig.tiny(toy.VOCAB), rngs=nnx.Rngs(seed))
    pc = PPOConfig.model_validate(
        {"rollouts": rollouts, "prompts_per_step": 4, "samples": 4, "seed": seed, **ppo}
    )
    cfg = PPORunConfig.model_validate({
        "run_dir": str(tmp), "ppo": pc.model_dump(),
        "optim": {"learning_rate": 5e-3, "decay": "constant"}, "checkpoint": {"every": 1},
        "train": {"progress": False, "metrics_hook": False},
    })  # fmt: skip
    vm = ValueModel(model, pol.feature_dim(model), shared=shared, rngs=nnx.Rngs(0))
    prompts = [{"prompt": p} for p in toy.answer_prompts()]
    src = PPOExperience(pol, prompts, plugin_reward_fn([toy.answer_reward]), pc, ref_model=ref)
    res = train_loop(vm, cfg.loop_config(), supervised(make_ppo_loss(pol, pc), src),
                     wrt=trainable(nnx.Param), name="ppo")  # fmt: skip
    return res, src, vm


@pytest.mark.slow  # over 7 s on two cores; default suite under 15 minutes
def test_ppo_trains_through_the_loop_with_one_compile(tmp_path: Path) -> None:
    res, src, vm = _run(tmp_path / "a", rollouts=1, kl_coef=0.1, kl_target=1e-4, kl_horizon=4)
    assert res.compiles == 1
    assert res.step == 2  # 1 rollout x (2 epochs x 1 minibatch)
    assert src.reward_calls == 4 * 4
    assert res.history[0]["kl/coef"] == pytest.approx(0.1)
    # the head trained (it starts at zero); the controller moved and its state is saved
    assert np.abs(np.asarray(vm.value_head.kernel.value)).sum() > 0
    assert float(src.kl_state.coef) != pytest.approx(0.1)
    assert src.state_dict()["kl_coef"] == pytest.approx(float(src.kl_state.coef))


@pytest.mark.slow
def test_ppo_resumes_in_process_with_the_controller_state(tmp_path: Path) -> None:
    _, src, _ = _run(tmp_path / "a", rollouts=2, kl_coef=0.1, kl_target=1e-4, kl_horizon=4)
    res2, src2, _ = _run(tmp_path / "a", rollouts=2, kl_coef=0.1, kl_target=1e-4, kl_horizon=4)
    assert res2.resumed_from == 4 and src2.state_dict() == src.state_dict()


@pytest.mark.slow
def test_separate_critic_is_a_copy_trained_beside_the_policy(tmp_path: Path) -> None:
    _, _, vm = _run(tmp_path, rollouts=1, shared=False, kl_coef=0.0)
    assert vm.critic is not None
    start = Transformer(ModelConfig.tiny(toy.VOCAB), rngs=nnx.Rngs(0))  # the same init
    emb = lambda m: np.asarray(m.embed_tokens.embedding.value)  # noqa: E731
    assert not np.array_equal(emb(vm.critic), emb(start))  # trained by the value loss
    assert not np.array_equal(emb(vm.critic), emb(vm.policy))  # not the policy's weights


@pytest.mark.slow
def test_ppo_learns_the_toy_answer_task(tmp_path: Path) -> None:
    res, _, _ = _run(tmp_path, rollouts=20, kl_coef=0.0, vf_coef=0.5)
    curve = [h["reward/total/mean"] for h in res.history]
    assert np.mean(curve[-4:]) > np.mean(curve[:2]) + 0.2


def test_ppo_config_checks() -> None:
    with pytest.raises(ValueError, match="do not split into 3 minibatches"):
        PPOConfig(prompts_per_step=4, samples=2, minibatches=3)
    cfg = PPORunConfig.model_validate(
        {"ppo": {"rollouts": 5, "epochs": 2, "minibatches": 2}, "checkpoint": {"every": 3}}
    )
    loop = cfg.loop_config()
    assert loop.train.steps == 20 and loop.train.batch_size == 16 and loop.checkpoint.every == 12
