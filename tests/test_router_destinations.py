"""Destinations: a phrase naming what the result is for goes only on a plan that makes
stills or audio alone, keeps the request's words and label, and the lever leaves every
other request as it was (its own random stream)."""

from __future__ import annotations

import random

from router_lever_helpers import check_added_phrases, check_phrase_pools, lever_changes

from studio_align.simulate.router.destinations import PHRASES, add_destination, destinations
from studio_align.simulate.router.phrases import GRADE, I2V, MUSIC, SPEECH, T2I, T2V
from studio_align.simulate.router.refusals import VIDEO_STEPS

# the medium each kind names, which the plan must not make
NAMES = {"still_for_video": VIDEO_STEPS, "still_for_audio": {MUSIC, SPEECH},
         "audio_for_video": VIDEO_STEPS}  # fmt: skip


def test_destination_prob_names_only_a_medium_the_plan_does_not_make() -> None:
    changed, n = lever_changes("destination_prob", 0.5, seed=4)
    assert 0.08 < len(changed) / n < 0.2  # stills and audio alone are about 28 % of plans
    check_added_phrases(changed, PHRASES, NAMES, min_added=5)


def test_only_stills_and_audio_alone_get_a_destination() -> None:
    assert destinations([T2I], []) == ["still_for_video", "still_for_audio"]
    assert destinations([GRADE], ["image"]) and not destinations([GRADE], ["video"])
    assert destinations([MUSIC], []) == ["audio_for_video"]
    for plan in ([T2V], [T2I, I2V], [T2V, MUSIC]):
        assert add_destination("make it", plan, [], "en", random.Random(0)) == "make it"


def test_phrase_pools_match_their_language_and_copy_no_hand_written_request() -> None:
    check_phrase_pools(PHRASES)
