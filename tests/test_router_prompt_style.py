"""Prompt-style requests: every intent in both languages, slots filled, labels unchanged,
the rest of the data untouched, and no hand-written request generated verbatim."""

from __future__ import annotations

import json
import random
import re

from router_lever_helpers import lever_changes

from studio_align.router import eval as packaged
from studio_align.router.format import is_cjk, normalize_text
from studio_align.simulate.router.phrases import INTENTS, T2I
from studio_align.simulate.router.prompt_style import render_prompt
from studio_align.simulate.router.requests import generate_examples

UNFILLED = re.compile(r"\{[a-z]+\}")


def test_every_intent_renders_varied_filled_prompts_in_both_languages() -> None:
    rng = random.Random(0)
    for intent in INTENTS:
        for lang in ("en", "zh"):
            texts = {render_prompt(intent, lang, rng) for _ in range(40)}
            assert len(texts) >= 25, (intent.name, lang)
            for text in texts:
                assert not UNFILLED.search(text), (intent.name, text)
                if text.startswith("{"):  # a JSON brief parses, and names every step
                    brief = json.loads(text)
                    assert len(brief) == 2, text
            if lang == "zh":
                assert sum(is_cjk(t) for t in texts) >= 0.8 * len(texts)


def test_a_bare_tag_prompt_is_only_written_for_an_image() -> None:
    """Without a deliverable named, a tag list means an image (what an image tool makes of
    it), so only text-to-image requests may be a subject with tags and parameters alone:
    every other one-step tag prompt names its cue (a camera move, a tempo, a lead word)."""
    rng = random.Random(1)
    midjourney = 0
    for intent in INTENTS:
        for _ in range(60):
            text = render_prompt(intent, "en", rng)
            if "--ar" in text or "/imagine" in text:
                midjourney += 1
                assert intent.plan == (T2I,), (intent.name, text)
    assert midjourney > 3


def test_prompt_prob_replaces_that_fraction_and_keeps_the_rest_byte_identical() -> None:
    changed, n = lever_changes("prompt_prob", 0.2, seed=5)
    assert 0.15 < len(changed) / n < 0.25


def test_no_hand_written_request_is_a_generated_prompt() -> None:
    generated = {normalize_text(r["request"]["text"]) for r in generate_examples(
        20000, seed=0, prompt_prob=1.0)}  # fmt: skip
    for name in packaged.SETS:
        rows = [r for r in packaged.load(name) if r.get("style") != "terse"]
        overlap = {normalize_text(r["request"]["text"]) for r in rows} & generated
        assert not overlap, (name, sorted(overlap)[:5])
