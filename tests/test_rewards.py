"""The reward contract: argument selection, None, weights, async, metrics, strict output checks."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from studio_align.errors import ConfigError, RewardError
from studio_align.rewards import Reward, as_rewards, resolve_weights
from studio_align.scoring import score_batch, score_batch_async

COLUMNS = {
    "plans": [["a"], ["b"], ["c"]],
    "prompts": ["x", "yy", "zzz"],
    "creators": ["c1", "c2", "c1"],
}


def test_only_named_arguments_are_passed():
    seen = {}

    def by_prompt(prompts):  # any extra keyword would be a TypeError here
        seen["by_prompt"] = prompts
        return [float(len(p)) for p in prompts]

    def with_default(plans, gold_plans=None):
        seen["with_default"] = gold_plans
        return [1.0] * len(plans)

    def everything(**kwargs):
        seen["everything"] = set(kwargs)
        return [0.0] * 3

    scores = score_batch(
        [by_prompt, with_default, everything], None, {**COLUMNS, "extra": [1, 2, 3]}
    )
    assert seen["by_prompt"] == COLUMNS["prompts"]
    assert seen["with_default"] is None  # default kept: gold_plans is not a column here
    assert seen["everything"] == {"plans", "prompts", "creators", "extra"}
    np.testing.assert_array_equal(scores.per_reward["by_prompt"], [1.0, 2.0, 3.0])


def test_missing_required_column_names_reward_and_column():
    def needs_gold(gold_plans):
        return [1.0] * len(gold_plans)

    with pytest.raises(RewardError, match=r"reward 'needs_gold'.*'gold_plans'"):
        score_batch([needs_gold], None, COLUMNS)


def test_reward_columns_introspection():
    r = Reward("r", lambda plans, gold_plans, catalog=None: plans)
    assert r.columns == ("plans", "gold_plans", "catalog")
    assert r.required_columns == ("plans", "gold_plans")


def test_none_is_no_opinion_and_total_is_weighted_sum_over_opinions():
    def a(plans):
        return [1.0, None, 3.0]

    def b(plans):
        return [None, None, 2.0]

    s = score_batch([a, b], {"a": 2.0, "b": -1.0}, COLUMNS)
    assert np.isnan(s.per_reward["a"][1])
    np.testing.assert_array_equal(s.per_reward["b"][:2], [np.nan, np.nan])
    np.testing.assert_allclose(s.total, [2.0, 0.0, 6.0 - 2.0])
    assert s.metrics["reward/a/mean"] == pytest.approx(2.0)
    assert s.metrics["reward/a/std"] == pytest.approx(1.0)
    assert s.metrics["reward/a/none_frac"] == pytest.approx(1 / 3)
    assert s.metrics["reward/b/none_frac"] == pytest.approx(2 / 3)
    assert s.metrics["reward/total/mean"] == pytest.approx(np.mean([2.0, 0.0, 4.0]))
    assert s.weights == {"a": 2.0, "b": -1.0}


def test_all_none_reward_has_zero_mean_and_full_none_fraction():
    s = score_batch([Reward("quiet", lambda plans: [None] * len(plans))], None, COLUMNS)
    assert s.metrics["reward/quiet/none_frac"] == 1.0
    assert s.metrics["reward/quiet/mean"] == 0.0
    np.testing.assert_array_equal(s.total, [0.0, 0.0, 0.0])


def test_weights_default_to_one_and_unknown_weight_is_an_error():
    assert resolve_weights(["a", "b"], {"b": 0.5}) == {"a": 1.0, "b": 0.5}
    with pytest.raises(ConfigError, match="'typo'"):
        resolve_weights(["a"], {"typo": 1.0})
    with pytest.raises(ConfigError, match="'a'"):
        resolve_weights(["a"], {"a": float("nan")})
    with pytest.raises(ConfigError, match="'a'"):
        resolve_weights(["a"], {"a": "heavy"})


def test_duplicate_reward_names_in_one_call():
    with pytest.raises(RewardError, match="'r' given twice"):
        as_rewards([Reward("r", lambda plans: plans), Reward("r", lambda plans: plans)])


def test_async_rewards_run_concurrently():
    # Each reward waits for the other to have started: sequential awaiting would time out.
    started: dict[str, asyncio.Event] = {}

    def make(me, other):
        async def reward(plans):
            started.setdefault(me, asyncio.Event()).set()
            ev = started.setdefault(other, asyncio.Event())
            await asyncio.wait_for(ev.wait(), timeout=2.0)
            return [1.0] * len(plans)

        return Reward(me, reward)

    def sync_one(plans):
        return [0.5] * len(plans)

    s = score_batch([make("a", "b"), make("b", "a"), sync_one], None, COLUMNS)
    np.testing.assert_allclose(s.total, [2.5, 2.5, 2.5])


def test_async_rewards_overlap():
    # Count rewards in flight at once (no clock): awaited one by one, the peak would be 1.
    active, peak = 0, 0

    async def slow(plans):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        for _ in range(5):
            await asyncio.sleep(0)  # yield to the other rewards
        active -= 1
        return [1.0] * len(plans)

    score_batch([Reward("s1", slow), Reward("s2", slow), Reward("s3", slow)], None, COLUMNS)
    assert peak == 3


def test_score_batch_inside_running_loop_and_async_variant():
    async def a(plans):
        await asyncio.sleep(0)
        return [2.0] * len(plans)

    async def main():
        inner = score_batch([Reward("a", a)], None, COLUMNS)  # runs on a helper thread
        outer = await score_batch_async([Reward("a", a)], {"a": 0.5}, COLUMNS)
        return inner, outer

    inner, outer = asyncio.run(main())
    np.testing.assert_allclose(inner.total, [2.0] * 3)
    np.testing.assert_allclose(outer.total, [1.0] * 3)


def test_context_values_are_passed_by_name():
    def uses_ctx(plans, scale):
        return [scale] * len(plans)

    s = score_batch([uses_ctx], None, COLUMNS, context={"scale": 3.0})
    np.testing.assert_allclose(s.total, [3.0] * 3)
    with pytest.raises(RewardError, match="both as columns and as context"):
        score_batch([uses_ctx], None, COLUMNS, context={"plans": 1, "scale": 1.0})


@pytest.mark.parametrize(
    ("output", "match"),
    [
        ([1.0, 2.0], r"returned 2 values for a batch of 3"),
        ([1.0, float("nan"), 2.0], r"returned nan at sample 1"),
        ([1.0, float("inf"), 2.0], r"returned inf at sample 1"),
        ([1.0, "good", 2.0], r"non-number at sample 1: str"),
        (1.0, r"returned float, expected a sequence"),
        ("abc", r"returned str"),
        (None, r"returned NoneType"),
        (np.ones((3, 1)), r"shape \(3, 1\)"),
        (np.array([1.0, np.nan, 0.0]), r"returned nan at sample 1"),
    ],
)
def test_bad_outputs_raise_reward_error_naming_the_reward(output, match):
    bad = Reward("shaky", lambda plans: output, plugin="acme")
    with pytest.raises(RewardError, match=r"reward 'shaky' \(plugin acme\)") as info:
        score_batch([bad], None, COLUMNS)
    assert info.match(match)


def test_reward_that_raises_is_named():
    def boom(plans):
        raise ValueError("kaput")

    with pytest.raises(RewardError, match=r"reward 'boom' raised ValueError: kaput"):
        score_batch([boom], None, COLUMNS)


def test_async_reward_that_raises_is_named_and_no_coroutine_leaks(recwarn):
    async def fine(plans):
        return [1.0] * len(plans)

    async def broken(plans):
        raise KeyError("x")

    with pytest.raises(RewardError, match=r"reward 'broken' raised KeyError"):
        score_batch([fine, broken], None, COLUMNS)

    def sync_boom(plans):
        raise RuntimeError("first")

    # `fine` was started (a coroutine) before `sync_boom` failed; it must be closed.
    with pytest.raises(RewardError, match="sync_boom"):
        score_batch([fine, sync_boom], None, COLUMNS)
    import gc

    gc.collect()
    assert not [w for w in recwarn if "never awaited" in str(w.message)]


def test_array_outputs_and_bools_are_accepted():
    s = score_batch(
        [
            Reward("np", lambda plans: np.arange(3, dtype=np.float32)),
            Reward("flags", lambda plans: [True, False, np.bool_(True)]),
            Reward("ints", lambda plans: (np.int64(1), 2, 3)),
        ],
        None,
        COLUMNS,
    )
    np.testing.assert_allclose(s.total, [2.0, 3.0, 6.0])


def test_columns_must_have_equal_lengths_and_size_without_columns():
    with pytest.raises(RewardError, match="column 'prompts' has 2 rows, expected 3"):
        score_batch([], None, {"plans": [1, 2, 3], "prompts": ["a", "b"]})
    s = score_batch([Reward("const", lambda: [1.0, 1.0])], None, {}, size=2)
    np.testing.assert_allclose(s.total, [1.0, 1.0])
    with pytest.raises(RewardError, match="size="):
        score_batch([], None, {})


def test_reward_construction_errors():
    with pytest.raises(RewardError, match="non-empty"):
        Reward("", lambda plans: plans)
    with pytest.raises(RewardError, match="callable"):
        Reward("x", 3)  # type: ignore[arg-type]
    with pytest.raises(RewardError, match="positional-only"):
        Reward("x", lambda plans, /: plans)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.floats(-1e3, 1e3)),
            st.one_of(st.none(), st.floats(-1e3, 1e3)),
        ),
        min_size=1,
        max_size=20,
    ),
    st.floats(-5, 5),
    st.floats(-5, 5),
)
def test_total_matches_weighted_nansum(rows, wa, wb):
    a = [r[0] for r in rows]
    b = [r[1] for r in rows]
    s = score_batch(
        [Reward("a", lambda plans: a), Reward("b", lambda plans: b)],
        {"a": wa, "b": wb},
        {"plans": [None] * len(rows)},
    )
    expect = [
        (wa * x if x is not None else 0.0) + (wb * y if y is not None else 0.0) for x, y in rows
    ]
    np.testing.assert_allclose(s.total, expect, rtol=1e-12, atol=1e-9)
    frac = sum(x is None for x in a) / len(a)
    assert math.isclose(s.metrics["reward/a/none_frac"], frac)
