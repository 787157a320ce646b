"""Flow-GRPO through the shared GRPO machinery: shift invariance and a checkable reward."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from flow_helpers import ARCHS, brightness, conds, grpo_toward_brightness, tiny_model

from studio_align.algorithms.grpo import grpo_advantages, grpo_loss
from studio_align.generation.flow_sampler import SDEConfig
from studio_align.rewards import Reward
from studio_align.training.grpo_config import plugin_reward_fn
from studio_align.training.loop import train_loop
from studio_align.training.ppo import PPOConfig, PPOExperience, PPORunConfig, make_ppo_loss
from studio_align.training.supervised import supervised
from studio_align.training.value_head import ValueModel, trainable
from studio_align.verticals.flow.policy import FlowPolicy

# minutes of CPU in subprocesses or training runs: opt-in (`pytest -m slow`), so the
# default suite stays under 15 minutes on 2 cores
pytestmark = pytest.mark.slow


def _loss_and_grads(model, policy, batch, old, rewards, group_size):
    adv, _ = grpo_advantages(jnp.asarray(rewards), group_size)

    def f(m):
        lp, mask, _ = policy.logps(m, batch)
        return grpo_loss(lp, old, None, adv, mask, epsilon=0.2, epsilon_high=0.28)[0]

    return nnx.value_and_grad(f)(model)


@pytest.mark.parametrize("arch", ARCHS)
def test_flow_grpo_loss_invariant_to_a_constant_shift_of_a_groups_rewards(arch):
    model = tiny_model(0, arch=arch)
    verts, tags = conds(2)
    policy = FlowPolicy(verts, tags, SDEConfig(steps=3))
    roll = policy.sample(model, [0, 1], 4, jax.random.key(1))
    batch = {k: jnp.asarray(v) for k, v in roll.batch.items()}
    moved = tiny_model(7, perturb=0.05, arch=arch)  # off-policy parameters: ratios != 1
    rewards = np.array([0.1, 0.9, 0.4, 0.2, 3.0, 1.0, 2.0, 5.0], np.float32)
    shifted = rewards + np.array([7.5] * 4 + [-2.0] * 4, np.float32)  # per-group shifts
    l1, g1 = _loss_and_grads(moved, policy, batch, jnp.asarray(roll.old_logps), rewards, 4)
    l2, g2 = _loss_and_grads(moved, policy, batch, jnp.asarray(roll.old_logps), shifted, 4)
    assert float(l1) == pytest.approx(float(l2), rel=1e-5, abs=1e-6)
    for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g2), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-7)
    assert abs(float(l1)) > 0  # the check is not vacuous: the loss depends on the rewards
    l3, _ = _loss_and_grads(moved, policy, batch, jnp.asarray(roll.old_logps), rewards[::-1], 4)
    assert float(l3) != pytest.approx(float(l1), rel=1e-3)


@pytest.mark.parametrize("arch", ARCHS)
def test_aligning_toward_brightness_moves_it_on_held_out_samples(arch):
    for before, after in grpo_toward_brightness(tiny_model(0, arch=arch)):
        assert after > before + 0.02, (before, after)


@pytest.mark.parametrize("shared", [True, False])
def test_ppo_trains_the_flow_generator_with_a_value_head(tmp_path, shared):
    """PPO on the flow policy (issue: "the router task and the flow task both do"): the
    critic reads pooled x_t and velocity per SDE step; one compile, the head and (when
    separate) the critic copy train, and the brightness reward rises on the rollouts."""
    model = tiny_model(0)
    verts, tags = conds(2, seed=3)
    policy = FlowPolicy(verts, tags, SDEConfig(steps=4))
    pc = PPOConfig.model_validate({"rollouts": 16, "prompts_per_step": 2, "samples": 6, "seed": 0,
                                   "kl_coef": 0.0, "vf_coef": 0.5})  # fmt: skip
    cfg = PPORunConfig.model_validate({
        "run_dir": str(tmp_path), "ppo": pc.model_dump(),
        "optim": {"name": "adam", "learning_rate": 3e-3, "decay": "constant"},
        "checkpoint": {"enabled": False}, "train": {"progress": False, "metrics_hook": False},
    })  # fmt: skip
    vm = ValueModel(model, policy.feature_dim(model), shared=shared, rngs=nnx.Rngs(0))
    src = PPOExperience(policy, [{"prompt": 0}, {"prompt": 1}],
                        plugin_reward_fn([Reward("brightness", brightness)]), pc,
                        ref_model=None)  # fmt: skip
    res = train_loop(vm, cfg.loop_config(), supervised(make_ppo_loss(policy, pc), src),
                     wrt=trainable(nnx.Param), name="ppo")  # fmt: skip
    assert res.compiles == 1
    assert np.abs(np.asarray(vm.value_head.kernel.value)).sum() > 0
    assert (vm.critic is None) == shared
    curve = [h["reward/total/mean"] for h in res.history]
    print("shared" if shared else "separate", [round(c, 3) for c in curve])
    assert np.mean(curve[-3:]) > np.mean(curve[:2]) + 0.01, curve
