"""Quoted words to draw, show or sing: they are added to the end of a request, keep its
plan, never touch a plan of speech alone, and come from no hand-written set."""

from __future__ import annotations

import random

from router_lever_helpers import lever_changes

from studio_align.router import eval as packaged
from studio_align.simulate.router.phrases import INTENTS
from studio_align.simulate.router.rendered_text import CLAUSES, QUOTES, WORDS, with_rendered_text


def test_a_clause_is_appended_to_that_share_and_speech_alone_is_left() -> None:
    changed, n = lever_changes("text_prob", 0.3, seed=3)
    assert 0.25 * 24 / 25 < len(changed) / n < 0.35 * 24 / 25
    assert ("audio.speech",) not in {tuple(x["plan"]) for _, x in changed}
    quoted = [left + w + right for lang, pool in WORDS.items() for w in pool
              for left, right in QUOTES[lang]]  # fmt: skip
    for b, x in changed:
        before, after = b["request"]["text"], x["request"]["text"]
        assert [q for q in quoted if q in after and q not in before], after


def test_every_clause_fills_for_every_intent() -> None:
    rng = random.Random(0)
    for intent in INTENTS:
        for lang in ("en", "zh"):
            for _ in range(20):
                text = with_rendered_text(intent, "a request", lang, rng)
                assert "{" not in text
                assert (text == "a request") == (intent.plan == ("audio.speech",))


def test_no_words_or_request_come_from_a_hand_written_set() -> None:
    sets = {r["request"]["text"].lower()
            for name in (*packaged.VAL_SETS, *packaged.EVAL_SETS) for r in packaged.load(name)}  # fmt: skip
    clauses = [c.replace("{q}", "").strip(" :：") for pools in CLAUSES.values()
               for pool in pools.values() for c in pool]  # fmt: skip
    # a clause of one or two English words or of up to five characters is a word of the trade
    phrases = [p for p in clauses if len(p.split()) > 2 or (not p.isascii() and len(p) > 5)]
    phrases += [w for pool in WORDS.values() for w in pool if len(w) > 3]
    assert not [p for p in phrases if any(p.lower() in t for t in sets)]
