"""GRPO over the grading policy through the shared GRPO trainer, and the demo."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from studio_align.errors import ConfigError
from studio_align.reward_models.color_stats import color_features, color_statistics
from studio_align.rewards import Reward
from studio_align.verticals.grading.policy import GradingPolicy, request_features
from studio_align.verticals.grading.renderer import N_PARAMS, render
from studio_align.verticals.grading.scenes import make_scenes
from studio_align.verticals.grading.tune import (
    GradingRolloutPolicy,
    GradingTuneConfig,
    tune_grading,
)


def warmth(images):
    """Verifiable reward: mean R - B of the output."""
    return color_statistics(np.stack(images))["warmth"].tolist()


def test_rollout_policy_matches_the_protocol():
    src = make_scenes(0, 4, (16, 16))
    pol = GradingPolicy(rngs=nnx.Rngs(0))
    rp = GradingRolloutPolicy(src, ["a", "b", "c", "d"], pol.request_dim)
    ro = rp.sample(pol, [2, 0], 3, jax.random.key(0))
    assert len(ro) == 6 and ro.old_logps.shape == (6, N_PARAMS) and ro.mask.all()
    np.testing.assert_allclose(
        ro.columns["images"][0], render(src[2], ro.batch["actions"][0]), atol=1e-6
    )
    lp, mask, ent = rp.logps(pol, {k: jnp.asarray(v) for k, v in ro.batch.items()})
    np.testing.assert_allclose(np.asarray(lp), ro.old_logps, atol=1e-4)  # on-policy ratio = 1
    assert ent.shape == (6, N_PARAMS) and bool(mask.all())


def test_grpo_raises_a_verifiable_reward():
    src = make_scenes(1, 24, (20, 20))
    req = ["warm"] * 24
    pol = GradingPolicy(rngs=nnx.Rngs(0), init_log_std=-1.0)
    pol.set_input_stats(color_features(src))
    ref = nnx.clone(pol)
    f, r = jnp.asarray(color_features(src)), jnp.asarray(request_features(req))

    def mean_warmth(p):
        return float(np.mean(warmth(list(render(src, np.asarray(p.mode(f, r)))))))

    before = mean_warmth(pol)
    cfg = GradingTuneConfig(
        steps=25, batch_sources=8, group_size=6, learning_rate=1e-2, weights={"warmth": 1.0}
    )
    hist = tune_grading(pol, ref, src, req, cfg, rewards={"warmth": Reward("warmth", warmth)})
    assert len(hist) == 25 and "kl" in hist[-1] and "clip_fraction" in hist[-1]
    assert mean_warmth(pol) > before + 0.05
    first = np.mean([h["reward/total/mean"] for h in hist[:3]])
    last = np.mean([h["reward/total/mean"] for h in hist[-3:]])
    assert last > first


def test_unknown_reward_weight_is_a_config_error():
    src = make_scenes(0, 2, (8, 8))
    pol = GradingPolicy(rngs=nnx.Rngs(0))
    with pytest.raises(ConfigError, match=r"tune\.weights: unknown reward"):
        tune_grading(pol, pol, src, ["", ""], GradingTuneConfig(weights={"nope": 1.0}), rewards={})


@pytest.mark.slow
def test_grading_demo_meets_its_targets(tmp_path):
    from studio_align.verticals.grading.demo import run_grading_demo

    rep = run_grading_demo(tmp_path, seed=0, quick=True)
    assert rep["reward_model"]["fraction_of_ceiling"] >= 0.9
    g = rep["grading"]
    assert g["win_rate_grpo_vs_untuned"] >= 0.8 and g["win_rate_grpo_vs_identity"] >= 0.8
    assert (tmp_path / "grading_grid.png").is_file()
    assert (tmp_path / "grading_report.json").is_file()


def test_tune_with_the_builtin_rewards_through_the_host():
    pytest.importorskip("open_clip")
    from studio_align.plugins import PluginHost
    from studio_align.reward_models.clip import TINY_CONFIG

    host = PluginHost.default(entry_points=False, env={})
    clip = host.encoders["clip"].factory(
        model="studio-tiny-clip", model_config=TINY_CONFIG, random_init=True
    )
    src = make_scenes(4, 6, (16, 16))
    pol = GradingPolicy(rngs=nnx.Rngs(0))
    cfg = GradingTuneConfig(
        steps=2, batch_sources=3, group_size=4, weights={"clip_critic": 1.0, "identity": 0.5}
    )
    hist = tune_grading(
        pol, nnx.clone(pol), src, ["warm film"] * 6, cfg,
        rewards=host.rewards, context={"clip_encoder": clip},
    )  # fmt: skip
    assert {"reward/clip_critic/mean", "reward/identity/mean"} <= set(hist[-1])
    assert 0.0 < hist[-1]["reward/identity/mean"] <= 1.0
