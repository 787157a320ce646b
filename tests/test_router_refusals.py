"""The generator's refusals: a request may refuse a step only when its plan lacks it, and
the lever leaves every other draw of the data unchanged (its own random stream)."""

from __future__ import annotations

import random

from studio_align.catalog import default_catalog
from studio_align.simulate.router.phrases import INTENTS, MUSIC, SPEECH
from studio_align.simulate.router.refusals import PHRASES, VIDEO_STEPS, add_refusal, refusable
from studio_align.simulate.router.requests import generate_examples

REFUSES = {"music": {MUSIC}, "voice": {SPEECH}, "video": set(VIDEO_STEPS), "picture": set()}


def test_a_refusal_never_names_a_step_of_the_plan() -> None:
    for intent in INTENTS:
        for kind in refusable(intent.plan, intent.attachments):
            assert not REFUSES.get(kind, set()) & set(intent.plan), (intent.name, kind)
    assert "music" in refusable(["wan.image_to_video"], ["image"])
    assert "music" not in refusable(["wan.image_to_video", "audio.music"], ["image"])
    assert "video" in refusable(["ideogram.text_to_image"], [])
    assert refusable(["wan.text_to_video", "audio.music", "audio.speech"], []) == []


def test_refusals_keep_labels_valid_and_the_rest_of_the_data_unchanged() -> None:
    cat = default_catalog()
    plain = generate_examples(300, seed=3, refusal_prob=0.0)
    refused = generate_examples(300, seed=3, refusal_prob=0.5)
    changed = 0
    for a, b in zip(plain, refused, strict=True):
        assert a["plan"] == b["plan"] and a["request"]["attachments"] == b["request"]["attachments"]
        assert cat.is_valid(b["plan"], b["request"]["attachments"])
        if a["request"]["text"] != b["request"]["text"]:
            changed += 1
            assert a["request"]["text"].lower()[:8] in b["request"]["text"].lower()
    assert 110 <= changed <= 190  # about half of 300
    assert generate_examples(50, seed=3, refusal_prob=0.5) == refused[:50]
    # evaluation splits never refuse unless asked
    assert generate_examples(50, seed=3, split="heldout") == generate_examples(
        50, seed=3, split="heldout", refusal_prob=0.0
    )


def test_every_phrase_pool_has_both_languages_and_both_positions() -> None:
    rng = random.Random(0)
    for kind, by_lang in PHRASES.items():
        assert set(by_lang) == {"en", "zh"}, kind
        for lang, (suffixes, prefixes) in by_lang.items():
            assert suffixes and prefixes, (kind, lang)
    text = add_refusal("animate this photo", ["wan.image_to_video"], ["image"], "en", rng)
    assert text != "animate this photo"
