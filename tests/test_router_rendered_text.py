"""Quoted words to draw, show, sing or speak: they are added to the end of a request, or
become its subject or its edit; they keep its plan, are framed for a step of that plan, and
come from no hand-written set."""

from __future__ import annotations

import random

from pytest import MonkeyPatch
from router_lever_helpers import hand_written_texts, lever_changes

from studio_align.simulate.router import rendered_text
from studio_align.simulate.router.phrases import EDIT, INTENTS, T2I, T2V
from studio_align.simulate.router.rendered_text import (
    CLAUSES,
    LETTERED_EDITS,
    LETTERED_SUBJECTS,
    QUOTES,
    WORDS,
    with_rendered_text,
)
from studio_align.simulate.router.slots import SLOTS

QUOTED = [left + w + right for lang, pool in WORDS.items() for w in pool
          for left, right in QUOTES[lang]]  # fmt: skip


def test_a_clause_is_appended_to_that_share() -> None:
    changed, n = lever_changes("text_prob", 0.3, seed=3)
    assert 0.25 < len(changed) / n < 0.35
    for b, x in changed:
        before, after = b["request"]["text"], x["request"]["text"]
        assert [q for q in QUOTED if q in after and q not in before], after


def test_every_clause_fills_and_frames_a_step_of_the_plan(monkeypatch: MonkeyPatch) -> None:
    monkeypatch.setattr(rendered_text, "NEUTRAL_PROB", 0.0)
    rng = random.Random(0)
    for intent in INTENTS:
        for lang in ("en", "zh"):
            for _ in range(20):
                text = with_rendered_text(intent, "a request", lang, rng)
                assert "{" not in text and text != "a request"
                framed = [step for step, pools in CLAUSES.items()
                          for c in pools[lang] if c.split("{q}")[0] in text]  # fmt: skip
                allowed = {*intent.plan} | ({None} if "grading.film" in intent.plan else set())
                assert set(framed) & allowed, (intent.name, text)


def test_lettering_swaps_a_subject_or_an_edit_for_words_in_quotes() -> None:
    changed, n = lever_changes("lettering_prob", 0.3, seed=3)
    assert 0.04 < len(changed) / n < 0.15  # only requests with a subject or an edit slot
    kinds = set()
    for b, x in changed:
        before, after = b["request"]["text"], x["request"]["text"]
        assert [q for q in QUOTED if q in after and q not in before], after
        for slot, new in (("subject", LETTERED_SUBJECTS), ("edit", LETTERED_EDITS)):
            old = [w for pool in SLOTS[slot].values() for w in pool if w in before]
            framed = [t for pool in new.values() for t in pool if t.split("{q}")[0] in after]
            if old and framed:
                kinds.add(slot)
                break
        else:
            raise AssertionError((before, after))
        assert {T2I, T2V, EDIT} & set(x["plan"]), x
    assert kinds == {"subject", "edit"}


def test_no_words_or_request_come_from_a_hand_written_set() -> None:
    sets = hand_written_texts()
    templates = [*CLAUSES.values(), LETTERED_SUBJECTS, LETTERED_EDITS]
    clauses = [half.strip(" :：") for pools in templates for pool in pools.values()
               for c in pool for half in c.split("{q}")]  # fmt: skip
    # a clause of one or two English words or of up to five characters is a word of the trade
    phrases = [p for p in clauses if len(p.split()) > 2 or (not p.isascii() and len(p) > 5)]
    phrases += [w for pool in WORDS.values() for w in pool if len(w) > 3]
    copied = {p for p in phrases if any(p.lower() in t for t in sets)}
    # the one known overlap: ordinary phrasing that handwritten_val10, written before the
    # lever, also uses ("birthday card with the words ..."); the lever's study names it
    assert copied <= {"with the words"}, copied
