"""Flow-GRPO's anti-hacking guards: reward ceiling, colour-stats anchor, early stopping."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from flow_helpers import conds, tiny_model

from studio_align.rewards import Reward
from studio_align.verticals.flow.align import FlowGRPOConfig, flow_grpo
from studio_align.verticals.flow.checkpoint import clone
from studio_align.verticals.flow.data import make_dataset
from studio_align.verticals.flow.experiment import (
    chosen_images,
    quality_stop,
    taste_fd_ratio,
    with_monitor,
)
from studio_align.verticals.flow.guards import (
    ClippedScorer,
    ColourAnchor,
    GuardConfig,
    ceiling_from,
    flow_anchor,
)


class _Linear:
    """A stand-in reward model: the mean brightness times 10."""

    def score_images(self, images, creators=None):
        return np.array([10.0 * float(np.mean(im)) for im in images])


def test_clipped_scorer_caps_at_the_chosen_images_quantile():
    imgs = [np.full((4, 4, 3), v, np.float32) for v in (0.1, 0.2, 0.3, 0.4, 0.5)]
    ceiling = ceiling_from(_Linear(), np.stack(imgs), "lumen", 0.5)
    assert ceiling == pytest.approx(3.0)
    s = ClippedScorer(_Linear(), ceiling).score_images([*imgs, np.ones((4, 4, 3), np.float32)])
    np.testing.assert_allclose(s, [1, 2, 3, 3, 3, 3], atol=1e-6)


def test_colour_anchor_spares_typical_images_and_penalises_off_data_ones():
    data = make_dataset(256, seed=0, size=16)[0].astype(np.float32) / 255.0
    anchor = ColourAnchor(data[:200])
    typical = np.asarray(flow_anchor(list(data[200:]), anchor))
    assert (typical <= 0).all() and np.mean(typical == 0) > 0.8
    pale = np.full((4, 16, 16, 3), 0.93, np.float32)  # the hack: pale uniform frames
    pale[..., 1] = 0.97
    off = np.asarray(flow_anchor(list(pale), anchor))
    assert (off < 0).all() and off.mean() < typical.mean() - 0.2


def test_guard_config_adds_the_guard_rewards_to_the_weights():
    w = GuardConfig(anchor_weight=2.0, diversity_weight=0.5).weights({"aesthetic": 1.0})
    assert w == {"aesthetic": 1.0, "flow_anchor": 2.0, "flow_diversity": 0.5}
    assert GuardConfig().weights({"aesthetic": 1.0}) == {"aesthetic": 1.0}
    off = GuardConfig.off()
    assert off.stop_fd_ratio is None and off.stop_diversity_ratio is None
    assert GuardConfig().stop_fd_ratio == 1.25  # the validated default keeps early stopping on


def _tiny_grpo(steps: int) -> FlowGRPOConfig:
    """A few fast Flow-GRPO steps of the tiny model on the brightness reward."""
    return FlowGRPOConfig.model_validate(
        {"train": {"steps": steps}, "optim": {"name": "adam", "learning_rate": 1e-2, "decay": "constant"},
         "prompts_per_step": 2, "group_size": 4, "sde_steps": 3, "beta": 0.0,
         "weights": {"brightness": 1.0}}
    )  # fmt: skip


def _brightness(images):
    return [float(np.mean(im)) for im in images]


@pytest.mark.slow  # compiles a GRPO step of the tiny model
def test_early_stop_restores_the_last_weights_that_passed():
    base = tiny_model(0)
    model = clone(base)
    verts, tags = conds(2, seed=3)
    cfg = _tiny_grpo(steps=6)
    checks = []

    def stop(m):  # passes at step 2, fails at step 4
        checks.append(jax.tree.map(np.asarray, jax.tree.leaves(m)))
        return len(checks) == 2

    hist = flow_grpo(model, base, verts, tags, cfg, stop=stop, check_every=2,
                     rewards={"brightness": Reward("brightness", _brightness)})  # fmt: skip
    assert len(hist) == 4 and hist[-1]["early_stop_kept"] == 2.0
    kept = jax.tree.leaves(model)
    for a, b in zip(kept, checks[0], strict=True):  # the weights seen at the step-2 check
        np.testing.assert_array_equal(np.asarray(a), b)
    assert any(not np.array_equal(np.asarray(a), b)
               for a, b in zip(kept, checks[1], strict=True))  # fmt: skip


@pytest.mark.slow  # compiles a GRPO step of the tiny model
def test_backtrack_keeps_the_latest_step_that_passes_after_a_failed_check():
    """Checks every 4 steps; the step-4 check fails, so bisection asks step 2 (passes) and
    then step 3 (fails): the weights of step 2 are kept, not the base's."""
    base = tiny_model(0)
    model = clone(base)
    verts, tags = conds(2, seed=3)
    cfg = _tiny_grpo(steps=8)
    seen = []
    verdicts = iter([True, False, True])  # step 4 fails, step 2 passes, step 3 fails

    def stop(m):
        seen.append(jax.tree.map(np.asarray, jax.tree.leaves(m)))
        return next(verdicts)

    hist = flow_grpo(model, base, verts, tags, cfg, stop=stop, check_every=4, backtrack=True,
                     rewards={"brightness": Reward("brightness", _brightness)})  # fmt: skip
    assert len(hist) == 4 and hist[-1]["early_stop_kept"] == 2.0 and len(seen) == 3
    kept = jax.tree.leaves(model)
    for a, b in zip(kept, seen[1], strict=True):  # the step-2 weights the bisection passed
        np.testing.assert_array_equal(np.asarray(a), b)
    for other in (seen[0], seen[2], jax.tree.leaves(base)):  # not step 4, 3 or the base
        assert any(not np.array_equal(np.asarray(a), np.asarray(b))
                   for a, b in zip(kept, other, strict=True))  # fmt: skip


@pytest.mark.slow  # compiles a GRPO step of the tiny model
def test_retry_runs_the_steps_not_kept_again_at_a_lower_learning_rate():
    """Checks every 2 of 4 steps; the first check fails, so the base is kept and the 4
    steps run again at half the learning rate, whose two checks pass: 4 steps kept."""
    base = tiny_model(0)
    verts, tags = conds(2, seed=3)
    rewards = {"brightness": Reward("brightness", _brightness)}
    seen = []
    verdicts = iter([True, False, False])  # step 2 fails; the retry's steps 2 and 4 pass

    def stop(m):
        seen.append(jax.tree.map(np.asarray, jax.tree.leaves(m)))
        return next(verdicts)

    model = clone(base)
    hist = flow_grpo(model, base, verts, tags, _tiny_grpo(steps=4), stop=stop, check_every=2,
                     retries=1, rewards=rewards)  # fmt: skip
    assert len(seen) == 3 and len(hist) == 2 + 4
    assert hist[-1]["early_stop_kept"] == 4.0 and hist[-1]["retries_used"] == 1.0
    for a, b in zip(jax.tree.leaves(model), seen[2], strict=True):  # the retry's last check
        np.testing.assert_array_equal(np.asarray(a), b)
    # without retries the same first verdict keeps the base
    model = clone(base)
    hist = flow_grpo(model, base, verts, tags, _tiny_grpo(steps=4), stop=lambda m: True,
                     check_every=2, rewards=rewards)  # fmt: skip
    assert hist[-1]["early_stop_kept"] == 0.0 and "retries_used" not in hist[-1]
    for a, b in zip(jax.tree.leaves(model), jax.tree.leaves(base), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_taste_fd_ratio_is_one_for_the_fixed_pick_and_grows_for_a_bright_taste():
    imgs = make_dataset(160, seed=1, size=16)[0].astype(np.float32) / 255.0
    cand = imgs[:96].reshape(24, 4, 16, 16, 3)
    bright = cand.reshape(24, 4, -1).mean(-1).argmax(1)
    prep = {"data": imgs[96:], "sel": {"candidates": cand,
            "picks": {"first": np.zeros(24, np.int64), "lumen": bright}}}  # fmt: skip
    np.testing.assert_array_equal(chosen_images(prep, "lumen"), cand[np.arange(24), bright])
    assert taste_fd_ratio(prep, "first") == pytest.approx(1.0)
    assert taste_fd_ratio(prep, "lumen") > 1.0


def test_monitor_sees_every_check_and_never_stops_on_its_own():
    seen: list[int] = []
    check = with_monitor(None, lambda m: seen.append(m))
    assert [check(i) for i in range(3)] == [False, False, False] and seen == [0, 1, 2]
    check = with_monitor(lambda m: m == 1, lambda m: seen.append(m))
    assert [check(i) for i in range(2)] == [False, True] and seen[-2:] == [0, 1]
    stop = lambda m: True  # noqa: E731
    assert with_monitor(stop, None) is stop


class _Dark(_Linear):
    """The stand-in reward model of a creator who wants darker frames."""

    def score_images(self, images, creators=None):
        return -super().score_images(images, creators)


@pytest.mark.slow  # over 7 s on two cores; default suite under 15 minutes
def test_reward_check_stops_a_model_its_reward_model_scores_below_the_base():
    base, moved = tiny_model(0), tiny_model(0, perturb=0.3)
    data = make_dataset(32, seed=0, size=8)[0].astype(np.float32) / 255.0
    off = {"stop_fd_ratio": None, "stop_diversity_ratio": None, "check_samples": 2}
    assert quality_stop({"data": data, "base": base}, GuardConfig(**off)) is None
    verdicts = []
    for scorer in (_Linear(), _Dark()):
        prep = {"data": data, "base": base, "scorer": scorer}
        stop = quality_stop(prep, GuardConfig(**off, stop_reward=True), "lumen")
        assert stop(base) is False  # the base itself never scores below the base
        verdicts.append(stop(moved))
    # the moved model is brighter or darker than the base: exactly one taste rejects it
    assert sorted(verdicts) == [False, True]
    # without a creator the reward check is off (the check is per creator)
    assert quality_stop(prep, GuardConfig(**off, stop_reward=True)) is None
