"""Colour-correction requests: only grade requests on an upload change, they keep their
plan, every template fills, and none comes from a hand-written set."""

from __future__ import annotations

import random

from router_lever_helpers import hand_written_texts, lever_changes

from studio_align.simulate.router.color_fix import FIX_TEMPLATES, PROBLEMS, WANTED, render_fix
from studio_align.simulate.router.phrases import INTENTS


def test_only_grade_requests_on_an_upload_are_rewritten() -> None:
    changed, n = lever_changes("fix_prob", 0.5, seed=3)
    names = {tuple(x["plan"]) for _, x in changed}
    assert names == {("grading.film",), ("grading.film", "audio.music")}
    assert all(x["request"]["attachments"] for _, x in changed)  # always on an upload
    assert 0.4 * 360 / 3000 < len(changed) / n < 0.6 * 360 / 3000  # half of 3 intents in 25


def test_every_template_fills_and_other_intents_get_none() -> None:
    rng = random.Random(0)
    for intent in INTENTS:
        for lang in ("en", "zh"):
            text = render_fix(intent, lang, rng)
            assert (text is None) == (intent.name not in FIX_TEMPLATES)
            assert text is None or "{" not in text


def test_no_request_or_phrase_comes_from_a_hand_written_set() -> None:
    sets = hand_written_texts()
    phrases = [p for pools in (PROBLEMS, WANTED) for pool in pools.values() for p in pool
               if len(p.split()) > 2 or len(p) > 5]  # fmt: skip
    assert not [p for p in phrases if any(p.lower() in t for t in sets)]
    rng = random.Random(1)
    rendered = {
        render_fix(i, lang, rng) for i in INTENTS for lang in ("en", "zh") for _ in range(30)
    }
    assert not {t.lower() for t in rendered if t} & sets
