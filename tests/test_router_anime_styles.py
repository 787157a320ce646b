"""Anime-family style words: the style changes, the plan and every other example do not."""

from __future__ import annotations

from router_lever_helpers import lever_changes

from studio_align.router.format import is_cjk
from studio_align.simulate.router.slots import ANIME_STYLES, SLOTS


def test_anime_prob_swaps_style_words_only_and_keeps_the_rest_byte_identical() -> None:
    changed, n = lever_changes("anime_prob", 1.0, seed=3)
    assert 0.02 < len(changed) / n < 0.12  # only requests with a style word change
    plans = set()
    for b, x in changed:
        old = [s for pool in SLOTS["style"].values() for s in pool
               if s in b["request"]["text"] and s not in x["request"]["text"]]  # fmt: skip
        assert old, (b["request"]["text"], x["request"]["text"])
        lang = "zh" if is_cjk(old[0]) else "en"
        assert any(s in x["request"]["text"] for s in ANIME_STYLES[lang]), x["request"]["text"]
        plans.add(tuple(x["plan"]))
    assert ("ideogram.text_to_image",) in plans and ("runway.video_to_video",) in plans
    assert not any("storyboard" in step for plan in plans for step in plan)


def test_anime_styles_are_new_words_in_their_own_language() -> None:
    plain = {s for pool in SLOTS["style"].values() for s in pool}
    for lang, pool in ANIME_STYLES.items():
        assert len(set(pool)) == len(pool) >= 4
        assert not plain & set(pool)
        assert all(is_cjk(s) == (lang == "zh") for s in pool)
