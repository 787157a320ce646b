"""The styled request generator: valid, bilingual, varied, and disjoint from the hand-written sets."""

from __future__ import annotations

import random

from studio_align.catalog import default_catalog
from studio_align.router import eval as packaged
from studio_align.router.format import is_cjk, normalize_text
from studio_align.simulate.router.lexicon import ATT_REFS, FIRST, TERSE, THEN
from studio_align.simulate.router.phrases import INTENTS
from studio_align.simulate.router.requests import generate_examples
from studio_align.simulate.router.styles import WIDE, render_styled


def test_styled_requests_cover_every_intent_in_both_languages() -> None:
    rng = random.Random(0)
    for intent in INTENTS:
        for lang in ("en", "zh"):
            texts = {render_styled(intent, lang, rng) for _ in range(30)}
            assert len(texts) >= 20, (intent.name, lang)  # varied, not a handful of strings
            if lang == "zh":
                assert sum(is_cjk(t) for t in texts) >= 25


def test_lexicon_covers_every_step_it_is_asked_for() -> None:
    for intent in INTENTS:
        first, *rest = intent.plan
        assert first in FIRST and all(s in THEN for s in rest), intent.name
        for kind in intent.attachments:
            assert kind in ATT_REFS
    assert set(TERSE) == set(FIRST)


def test_generated_training_data_is_valid_and_mixes_styles() -> None:
    cat = default_catalog()
    rows = generate_examples(2000, seed=3)
    assert all(cat.is_valid(r["plan"], r["request"]["attachments"]) for r in rows)
    zh = sum(is_cjk(r["request"]["text"]) for r in rows) / len(rows)
    assert 0.4 < zh < 0.6
    terse = sum(len(r["request"]["text"]) <= 6 for r in rows)
    assert terse > 20  # one-word requests now occur
    assert generate_examples(50, seed=3) == rows[:50]  # a pure function of the seed
    # the wide lexicon's styled requests can be terse too; without either style none are
    plain = generate_examples(200, seed=3, styled_prob=0.0, wide_prob=0.0)
    assert sum(len(r["request"]["text"]) <= 6 for r in plain) == 0


def test_no_handwritten_request_is_generated_verbatim() -> None:
    generated = {normalize_text(r["request"]["text"]) for r in generate_examples(20000, seed=0)}
    for name in packaged.SETS:
        # one-word requests ("poster", "配乐") are words, not sentences: those may coincide
        rows = [r for r in packaged.load(name) if r.get("style") != "terse"]
        texts = {normalize_text(r["request"]["text"]) for r in rows}
        overlap = texts & generated
        assert not overlap, (name, sorted(overlap)[:5])


def test_wide_lexicon_fills_every_slot_and_keeps_the_rest_of_the_data() -> None:
    """`wide_prob` replaces about that fraction of requests (labels unchanged, every slot
    filled) and leaves every other example byte-identical, so levers compare paired. The
    spoken-line and anime-subject swaps are off here: they edit what the wide lexicon
    wrote, so their later picks follow the wide lexicon's text (`levers.py`)."""
    off = {"spoken_prob": 0.0, "anime_subject_prob": 0.0}
    base = generate_examples(3000, seed=5, wide_prob=0.0, **off)
    wide = generate_examples(3000, seed=5, wide_prob=0.3, **off)
    changed = [(b, w) for b, w in zip(base, wide, strict=True) if b != w]
    assert 0.2 < len(changed) / len(base) < 0.4
    for b, w in changed:
        assert (b["plan"], b["request"]["attachments"]) == (w["plan"], w["request"]["attachments"])
        assert "{" not in w["request"]["text"] and "}" not in w["request"]["text"]
    rng = random.Random(0)
    for intent in INTENTS:
        for lang in ("en", "zh"):
            for _ in range(40):
                text = render_styled(intent, lang, rng, lexicon=WIDE)
                assert "{" not in text, (intent.name, text)
    # the wider pools hold the base ones, for every step and language
    for pools, extra in ((WIDE.first, FIRST), (WIDE.then, THEN), (WIDE.terse, TERSE)):
        for step, by_lang in extra.items():
            for lang, phrases in by_lang.items():
                assert set(phrases) <= set(pools[step][lang])
            assert step in pools
    generated = {normalize_text(r["request"]["text"]) for r in generate_examples(
        20000, seed=0, wide_prob=1.0)}  # fmt: skip
    for name in packaged.SETS:
        rows = [r for r in packaged.load(name) if r.get("style") != "terse"]
        overlap = {normalize_text(r["request"]["text"]) for r in rows} & generated
        assert not overlap, (name, sorted(overlap)[:5])
