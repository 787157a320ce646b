"""Cinema's words as a look: a phrase is added before or after a request that makes
something new, keeps its plan, comes from its step's pool, and from no hand-written set."""

from __future__ import annotations

import random

from router_lever_helpers import hand_written_texts, lever_changes

from studio_align.simulate.router.film_words import POOLS, with_film_words
from studio_align.simulate.router.phrases import INTENTS


def test_a_phrase_is_added_to_that_share_of_the_requests_that_make_something() -> None:
    changed, n = lever_changes("film_prob", 0.3, seed=3)
    makes = sum(any(s in POOLS for s in i.plan) for i in INTENTS) / len(INTENTS)
    assert 0.25 * makes < len(changed) / n < 0.35 * makes
    phrases = [p for pools in POOLS.values() for pool in pools.values() for p in pool]
    for b, x in changed:
        before, after = b["request"]["text"], x["request"]["text"]
        assert any(
            p.lower() in after.lower() and p.lower() not in before.lower() for p in phrases
        ), after


def test_the_phrase_comes_from_a_step_of_the_plan_and_an_upload_only_edit_is_left_alone() -> None:
    rng = random.Random(0)
    for intent in INTENTS:
        steps = [s for s in intent.plan if s in POOLS]
        for lang in ("en", "zh"):
            for _ in range(20):
                text = with_film_words(intent, "a request", lang, rng)
                if not steps:
                    assert text == "a request"
                    continue
                found = [s for s in steps if any(p.lower() in text.lower() for p in POOLS[s][lang])]
                assert found and "a request" in text, (intent.name, text)


def test_no_phrase_comes_from_a_hand_written_set() -> None:
    sets = hand_written_texts()
    phrases = [p for pools in POOLS.values() for pool in pools.values() for p in pool]
    # a phrase of one English word or of up to three characters is a word of the trade
    phrases = [p for p in phrases if len(p.split()) > 1 or (not p.isascii() and len(p) > 3)]
    copied = {p for p in phrases if any(p.lower() in t for t in sets)}
    # the known overlap: the trade's phrase for a still's light, which a tag prompt in
    # handwritten_val9 also uses; the lever's study names it
    assert copied <= {"cinematic lighting"}, copied
