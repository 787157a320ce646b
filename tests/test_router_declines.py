"""Declines: a request may decline only a step its plan lacks, keeps its words and label,
and the lever leaves every other request as it was (its own random stream)."""

from __future__ import annotations

import random

from router_lever_helpers import check_added_phrases, check_phrase_pools, lever_changes

from studio_align.simulate.router.declines import PHRASES, add_decline
from studio_align.simulate.router.phrases import MUSIC, SPEECH
from studio_align.simulate.router.refusals import IMAGE_STEPS, VIDEO_STEPS

DECLINES = {"music": {MUSIC}, "voice": {SPEECH}, "video": VIDEO_STEPS, "picture": IMAGE_STEPS}


def test_decline_prob_adds_one_sentence_for_a_step_the_plan_lacks() -> None:
    # destinations attach their phrase after a decline's; off, each change is the decline's
    changed, n = lever_changes("decline_prob", 0.2, seed=4, destination_prob=0.0)
    assert 0.12 < len(changed) / n < 0.22  # plans with every medium have nothing to decline
    check_added_phrases(changed, PHRASES, DECLINES, min_added=10)


def test_a_plan_with_every_medium_is_left_alone() -> None:
    plan = ["wan.text_to_video", MUSIC, SPEECH]
    assert add_decline("make it", plan, [], "en", random.Random(0)) == "make it"
    text = add_decline("把这张图调成暖色", ["grading.film"], ["image"], "zh", random.Random(1))
    assert text != "把这张图调成暖色" and "把这张图调成暖色" in text


def test_phrase_pools_match_their_language_and_copy_no_hand_written_request() -> None:
    check_phrase_pools(PHRASES)
