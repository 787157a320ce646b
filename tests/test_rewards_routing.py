"""Built-in routing rewards: intent_accuracy (exact / ordered-step F1) and plan_validity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from studio_align.catalog import Engine, default_catalog
from studio_align.hookspecs import hookimpl
from studio_align.plugins import PluginHost
from studio_align.router.rewards import (
    intent_accuracy,
    lcs_length,
    ordered_step_f1,
    plan_validity,
)
from studio_align.scoring import score_registered

I2V, MUSIC, T2I, EDIT = (
    "wan.image_to_video",
    "audio.music",
    "ideogram.text_to_image",
    "ideogram.edit_image",
)


def test_lcs_and_f1_by_hand():
    assert lcs_length([], [I2V]) == 0
    assert lcs_length([I2V, MUSIC], [I2V, MUSIC]) == 2
    assert lcs_length([MUSIC, I2V], [I2V, MUSIC]) == 1
    assert lcs_length(["a", "x", "b", "c"], ["a", "b", "y", "c"]) == 3
    # P = 1/1, R = 1/2 -> F1 = 2/3
    assert ordered_step_f1([I2V], [I2V, MUSIC]) == pytest.approx(2 / 3)
    assert ordered_step_f1([], []) == 1.0
    assert ordered_step_f1([T2I], [I2V]) == 0.0


def test_intent_accuracy_exact_partial_and_none():
    plans = [[I2V, MUSIC], [MUSIC, I2V], [I2V], [T2I], [I2V]]
    gold = [[I2V, MUSIC], [I2V, MUSIC], [I2V, MUSIC], [I2V], None]
    assert intent_accuracy(plans, gold) == [1.0, 0.5, pytest.approx(2 / 3), 0.0, None]


@given(
    st.lists(st.sampled_from("abcd"), max_size=6),
    st.lists(st.sampled_from("abcd"), max_size=6),
)
def test_f1_is_symmetric_bounded_and_one_only_when_equal(p, g):
    f = ordered_step_f1(p, g)
    assert 0.0 <= f <= 1.0
    assert f == pytest.approx(ordered_step_f1(g, p))
    assert (f == 1.0) == (p == g)
    assert intent_accuracy([p], [g]) == [1.0 if p == g else f]


def test_plan_validity_depends_on_attachments():
    cat = default_catalog()
    plans = [[I2V, MUSIC], [I2V, MUSIC], [T2I, EDIT], ["nope.step"], [], [I2V]]
    requests = [
        {"text": "animate this", "attachments": ["image"]},
        {"text": "animate this", "attachments": []},  # nothing to animate
        {"text": "draw then edit"},  # the first step makes the image the second needs
        {"text": "?", "attachments": []},
        {"text": "empty plan", "attachments": []},
        None,
    ]
    assert plan_validity(plans, requests, catalog=cat) == [1.0, 0.0, 1.0, 0.0, 0.0, None]


def test_plan_validity_accepts_request_objects():
    class Req:
        attachments = ("video",)

    assert plan_validity([["runway.video_to_video"]], [Req()], catalog=default_catalog()) == [1.0]


def test_routing_rewards_through_host_use_plugin_engines():
    class ThreeD:
        @hookimpl
        def studio_align_register_engines(self, register):
            register(Engine("mesh.image_to_3d", frozenset({"image"}), "image", "lift to 3D"))

    host = PluginHost()
    host.load_builtins()
    host.register(ThreeD(), name="threed")
    columns = {
        "plans": [["mesh.image_to_3d"], ["mesh.image_to_3d"], [I2V]],
        "gold_plans": [["mesh.image_to_3d"], [I2V], [I2V, MUSIC]],
        "requests": [{"attachments": ["image"]}, {"attachments": []}, {"attachments": ["image"]}],
    }
    s = score_registered(host, {"intent_accuracy": 1.0, "plan_validity": 0.5}, columns)
    np.testing.assert_allclose(s.per_reward["plan_validity"], [1.0, 0.0, 1.0])
    np.testing.assert_allclose(s.per_reward["intent_accuracy"], [1.0, 0.0, 2 / 3])
    np.testing.assert_allclose(s.total, [1.5, 0.0, 2 / 3 + 0.5])


def test_bad_plan_type_is_a_reward_error_naming_reward():
    from studio_align.errors import RewardError

    host = PluginHost()
    host.load_builtins()
    with pytest.raises(RewardError, match=r"reward 'intent_accuracy' \(plugin routing\)"):
        score_registered(
            host, ["intent_accuracy"], {"plans": ["wan.image_to_video"], "gold_plans": [[I2V]]}
        )
