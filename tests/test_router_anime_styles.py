"""Anime-family style words: the style changes, the plan and every other example do not."""

from __future__ import annotations

from router_lever_helpers import lever_changes, swapped_plans

from studio_align.router.format import is_cjk
from studio_align.simulate.router.slots import ANIME_STYLES, SLOTS


def test_anime_prob_swaps_style_words_only_and_keeps_the_rest_byte_identical() -> None:
    changed, n = lever_changes("anime_prob", 1.0, seed=3)
    assert 0.02 < len(changed) / n < 0.12  # only requests with a style word change
    plans = swapped_plans(changed, SLOTS["style"], ANIME_STYLES)
    assert ("ideogram.text_to_image",) in plans and ("runway.video_to_video",) in plans
    assert not any("storyboard" in step for plan in plans for step in plan)


def test_anime_styles_are_new_words_in_their_own_language() -> None:
    plain = {s for pool in SLOTS["style"].values() for s in pool}
    for lang, pool in ANIME_STYLES.items():
        assert len(set(pool)) == len(pool) >= 4
        assert not plain & set(pool)
        assert all(is_cjk(s) == (lang == "zh") for s in pool)
