"""Spoken lines that name a medium: the line changes, the plan and every other example do
not, and no line is one of the hand-written sets' own."""

from __future__ import annotations

from router_lever_helpers import hand_written_texts, lever_changes, swapped_plans

from studio_align.router.format import is_cjk
from studio_align.simulate.router.slots import SLOTS, SPOKEN_LINES


def test_spoken_prob_swaps_spoken_lines_only_and_keeps_the_rest_byte_identical() -> None:
    changed, n = lever_changes("spoken_prob", 1.0, seed=3)
    assert 0.03 < len(changed) / n < 0.15  # only requests with a spoken line change
    plans = swapped_plans(changed, SLOTS["line"], SPOKEN_LINES)
    assert all("audio.speech" in plan for plan in plans)  # lines are what a voice says
    assert ("audio.speech",) in plans and ("wan.text_to_video", "audio.speech") in plans


def test_spoken_lines_are_new_and_none_comes_from_a_hand_written_set() -> None:
    plain = {s for pool in SLOTS["line"].values() for s in pool}
    sets = hand_written_texts()
    for lang, pool in SPOKEN_LINES.items():
        assert len(set(pool)) == len(pool) >= 20
        assert not plain & set(pool)
        assert all(is_cjk(s) == (lang == "zh") for s in pool)
        assert not [s for s in pool if any(s.lower() in t for t in sets)]
