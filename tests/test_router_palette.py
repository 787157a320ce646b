"""Colours asked for as part of what is made: a palette is added after a request that makes
a picture from words, never to one that grades, edits or restyles, keeps its plan, and
comes from no hand-written set."""

from __future__ import annotations

import random

from router_lever_helpers import hand_written_texts, lever_changes

from studio_align.simulate.router.palette import CHANGES, COLOURS, MAKES, with_palette
from studio_align.simulate.router.phrases import INTENTS


def test_a_palette_is_added_to_that_share_of_the_requests_that_make_a_picture() -> None:
    changed, n = lever_changes("palette_prob", 0.3, seed=3)
    takes = [i for i in INTENTS if set(i.plan) & set(MAKES) and not set(i.plan) & set(CHANGES)]
    assert 0.25 * len(takes) / len(INTENTS) < len(changed) / n < 0.35 * len(takes) / len(INTENTS)
    for b, x in changed:
        assert not set(x["plan"]) & set(CHANGES), x
        before, after = b["request"]["text"], x["request"]["text"]
        assert any(c in after and c not in before for pool in COLOURS.values() for c in pool), after


def test_every_plan_that_makes_a_picture_from_words_takes_one_and_no_other_plan_does() -> None:
    rng = random.Random(0)
    for intent in INTENTS:
        takes = bool(set(intent.plan) & set(MAKES)) and not set(intent.plan) & set(CHANGES)
        for lang in ("en", "zh"):
            text = with_palette(intent, "a request", lang, rng)
            assert (text != "a request") == takes, (intent.name, text)
            assert "{" not in text and text.startswith("a request")


def test_no_palette_comes_from_a_hand_written_set() -> None:
    sets = hand_written_texts()
    copied = {c for pool in COLOURS.values() for c in pool if any(c.lower() in t for t in sets)}
    assert not copied, copied
