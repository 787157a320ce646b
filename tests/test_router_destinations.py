"""Destinations: a phrase naming what the result is for goes only on a plan that makes
stills or audio alone, keeps the request's words and label, and the lever leaves every
other request as it was (its own random stream). Their twins ask for the medium named and
carry the plan that makes it."""

from __future__ import annotations

import random

from router_lever_helpers import check_added_phrases, check_phrase_pools, kinds_in, lever_changes

from studio_align.simulate.router.destinations import (
    PHRASES,
    TWINS,
    destination_or_twin,
    destinations,
    twin,
)
from studio_align.simulate.router.phrases import (
    BOARD,
    GRADE,
    I2V,
    INTENTS,
    MUSIC,
    SPEECH,
    T2I,
    T2V,
    Intent,
)
from studio_align.simulate.router.refusals import VIDEO_STEPS
from studio_align.simulate.router.requests import generate_examples

# the medium each kind names, which the plan must not make
NAMES = {"still_for_video": VIDEO_STEPS, "still_for_audio": {MUSIC, SPEECH},
         "audio_for_video": VIDEO_STEPS}  # fmt: skip


def test_destination_prob_names_only_a_medium_the_plan_does_not_make() -> None:
    changed, n = lever_changes("destination_prob", 0.5, seed=4, twin_prob=0.0)
    assert 0.08 < len(changed) / n < 0.2  # stills and audio alone are about 28 % of plans
    check_added_phrases(changed, PHRASES, NAMES, min_added=5)


def test_only_stills_and_audio_alone_get_a_destination() -> None:
    assert destinations([T2I], []) == ["still_for_video", "still_for_audio"]
    assert destinations([GRADE], ["image"]) and not destinations([GRADE], ["video"])
    assert destinations([MUSIC], []) == ["audio_for_video"]
    for plan in ([T2V], [T2I, I2V], [T2V, MUSIC]):
        intent = Intent("x", tuple(plan), (), (), ())
        rng = random.Random(0)
        out = destination_or_twin(intent, "make it", "en", rng, intents=INTENTS, twin_prob=1.0,
                                  twin_rng=rng)  # fmt: skip
        assert out == (intent, "make it")


def test_a_twin_adds_the_medium_it_names_and_no_other_change() -> None:
    by_plan = {(i.plan, i.attachments): i for i in INTENTS}
    board = by_plan[((BOARD,), ())]
    assert twin(board, "still_for_video", INTENTS) == by_plan[((BOARD, I2V), ())]
    assert twin(by_plan[((MUSIC,), ())], "audio_for_video", INTENTS).plan == (T2V, MUSIC)
    assert twin(by_plan[((SPEECH,), ())], "audio_for_video", INTENTS).plan == (T2V, SPEECH)
    assert twin(board, "still_for_audio", INTENTS) is None  # no plan makes a still and music
    assert twin(by_plan[((GRADE,), ("image",))], "still_for_video", INTENTS) is None


def test_twin_kinds_limits_the_twins_to_those_kinds() -> None:
    fixed = {"destination_prob": 0.5, "twin_prob": 0.5, "foreign_prob": 0.0}
    stills = generate_examples(3000, seed=4, twin_kinds=("still_for_video",), **fixed)
    both = generate_examples(3000, seed=4, twin_kinds=tuple(TWINS), **fixed)
    base = generate_examples(3000, seed=4, **{**fixed, "twin_prob": 0.0})
    added = {tuple(s for s in x["plan"] if s not in b["plan"])
             for b, x in zip(base, stills, strict=True) if b != x}  # fmt: skip
    assert added == {(I2V,)}  # no new video under audio
    assert stills != both


def test_twin_prob_turns_destinations_into_asks_with_the_fuller_plan() -> None:
    fixed = {"destination_prob": 0.5, "foreign_prob": 0.0}  # no other language rewrites the text
    base = generate_examples(3000, seed=4, twin_prob=0.0, **fixed)
    twins = generate_examples(3000, seed=4, twin_prob=0.5, twin_kinds=tuple(TWINS), **fixed)
    changed = [(b, x) for b, x in zip(base, twins, strict=True) if b != x]
    assert 0.03 < len(changed) / len(base) < 0.1  # half of the destinations that have a twin
    for b, x in changed:
        added = [s for s in x["plan"] if s not in b["plan"]]
        assert added in ([I2V], [T2V]) and len(x["plan"]) == len(b["plan"]) + 1, (b, x)
        assert b["request"]["attachments"] == x["request"]["attachments"]
        assert kinds_in(x["request"]["text"], TWINS), x["request"]["text"]
        assert not kinds_in(x["request"]["text"], PHRASES), x["request"]["text"]


def test_phrase_pools_match_their_language_and_copy_no_hand_written_request() -> None:
    check_phrase_pools(PHRASES)
    check_phrase_pools(TWINS)
