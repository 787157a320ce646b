"""GRPO over the grading policy through the shared GRPO trainer, and the demo."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.reward_models.color_stats import color_statistics
from studio_align.simulate.grading.scenes import make_scenes
from studio_align.verticals.grading.policy import GradingPolicy
from studio_align.verticals.grading.renderer import N_PARAMS, render
from studio_align.verticals.grading.rollout import GradingRolloutPolicy


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
