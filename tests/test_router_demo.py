"""Demo request generator, simulated creators and the handwritten set."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from studio_align.catalog import default_catalog
from studio_align.data.schemas import EVENT_ADAPTER
from studio_align.router import eval as packaged
from studio_align.router.data import read_examples
from studio_align.router.format import is_cjk, normalize_text
from studio_align.simulate.router.creators import (
    Creator,
    demo_creator_data,
    majority_plans,
    make_creators,
)
from studio_align.simulate.router.phrases import FIRST_CLAUSES, INTENTS
from studio_align.simulate.router.requests import (
    demo_splits,
    generate_examples,
    heldout_clause_examples,
    templates,
)

HANDWRITTEN = packaged.path("handwritten_v1")


def test_generator_is_deterministic_and_seeded() -> None:
    a = generate_examples(50, seed=3)
    assert a == generate_examples(50, seed=3)
    assert a != generate_examples(50, seed=4)


def test_generator_covers_catalog_languages_and_plan_lengths() -> None:
    cat = default_catalog()
    rows = generate_examples(2000, seed=0)
    steps = Counter(s for r in rows for s in r["plan"])
    assert set(steps) == set(cat.names)
    lengths = Counter(len(r["plan"]) for r in rows)
    assert set(lengths) == {1, 2, 3}
    zh = sum(is_cjk(r["request"]["text"]) for r in rows) / len(rows)
    assert 0.4 < zh < 0.65
    assert all(cat.is_valid(r["plan"], r["request"]["attachments"]) for r in rows)
    # varied phrasing: almost every text distinct
    assert len({r["request"]["text"] for r in rows}) > 0.95 * len(rows)
    # mixed-language requests exist (Chinese text with latin words)
    assert any(
        is_cjk(t) and re.search("[a-z]{3,}", t) for t in (r["request"]["text"] for r in rows)
    )


def test_intent_repeats_set_each_intents_share_of_training_only() -> None:
    n = len(INTENTS) * (len(INTENTS) + 1) * 2  # whole cycles of either
    still = ("ideogram.text_to_image",)

    def share(rows: list[dict[str, object]]) -> float:
        return sum(tuple(r["plan"]) == still for r in rows) / len(rows)  # type: ignore[arg-type]

    even = generate_examples(n, seed=1, destination_prob=0.0)
    twice = generate_examples(n, seed=1, destination_prob=0.0, intent_repeats={"text_to_image": 2})
    assert share(even) == 1 / len(INTENTS)
    assert share(twice) == 2 / (len(INTENTS) + 1)
    # held-out data keeps the even cycle unless asked
    assert generate_examples(60, seed=1, split="heldout") == generate_examples(
        60, seed=1, split="heldout", intent_repeats={}
    )
    for bad in ({"no_such_intent": 2}, {"text_to_image": 0}):
        with pytest.raises(ValueError, match="intent_repeats"):
            generate_examples(10, intent_repeats=bad)


def test_heldout_uses_only_unseen_templates() -> None:
    for intent in INTENTS:
        for lang in ("en", "zh"):
            assert not set(templates(intent, lang, "train")) & set(
                templates(intent, lang, "heldout")
            )
    splits = demo_splits(seed=0, n_train=300, n_val=30, n_heldout=200)
    train_texts = {r["request"]["text"] for r in splits["train"]}
    assert not train_texts & {r["request"]["text"] for r in splits["heldout"]}


def test_heldout_clause_split_uses_phrasings_of_no_other_split() -> None:
    rows = heldout_clause_examples(300, seed=9001)
    assert rows == heldout_clause_examples(300, seed=9001)
    texts = {r["request"]["text"] for r in rows}
    others = generate_examples(2000, seed=0) + generate_examples(400, seed=1, split="heldout")
    assert not texts & {r["request"]["text"] for r in others}

    # requests start from a first clause training never shows (its pool's last entry,
    # slots as wildcards); synonym swaps and typos rewrite a few, so most, not all, match
    def pattern(clause: str) -> re.Pattern[str]:
        return re.compile(".*".join(re.escape(x) for x in re.split(r"\{\w+\}", clause)))

    held = [pattern(v[lang][-1]) for v in FIRST_CLAUSES.values() for lang in ("en", "zh")]
    hits = sum(any(p.search(normalize_text(r["request"]["text"])) for p in held) for r in rows)
    assert hits >= 0.8 * len(rows)
    assert {len(r["plan"]) for r in rows} == {1, 2, 3}


def test_creator_preferences_follow_hidden_flags() -> None:
    cat = default_catalog()
    both = Creator("x", music_on_video=True, runway_restyle=True, zh_fraction=0.5)
    none = Creator("y", music_on_video=False, runway_restyle=False, zh_fraction=0.5)
    assert both.preferred_plan(["grading.film"], ["video"], cat) == [
        "runway.video_to_video",
        "audio.music",
    ]
    assert both.preferred_plan(["grading.film"], ["image"], cat) == ["grading.film"]
    assert both.preferred_plan(["wan.text_to_video"], ["audio"], cat) == ["wan.text_to_video"]
    assert both.preferred_plan(["wan.text_to_video", "audio.speech"], [], cat) == [
        "wan.text_to_video",
        "audio.speech",
    ]
    assert none.preferred_plan(["wan.text_to_video"], [], cat) == ["wan.text_to_video"]
    creators = make_creators(200, seed=0)
    assert 0.7 < sum(c.music_on_video for c in creators) / 200 < 0.9


def test_route_logs_validate_and_preferences_differ_from_labels() -> None:
    d = demo_creator_data(seed=0, n_train_creators=10, n_eval_creators=4)
    outcomes = Counter(e["outcome"] for e in d["route_logs"])
    assert set(outcomes) == {"accepted", "rerouted", "abandoned"}
    for ev in d["route_logs"]:
        EVENT_ADAPTER.validate_json(json.dumps(ev))
    cat = default_catalog()
    pref = d["eval_preferred"]
    assert all(cat.is_valid(p["plan"], p["request"]["attachments"]) for p in pref)
    agree = sum(p["plan"] == p["gold_plan"] for p in pref) / len(pref)
    assert 0.4 < agree < 0.85  # the labelled plan is often not what creators want
    assert {p["creator"] for p in pref}.isdisjoint({e["creator"] for e in d["route_logs"]})


def test_handwritten_set_is_valid_bilingual_and_not_generated() -> None:
    cat = default_catalog()
    rows = read_examples(HANDWRITTEN)
    assert len(rows) >= 40
    assert all(cat.is_valid(r["plan"], r["request"]["attachments"]) for r in rows)
    zh = sum(is_cjk(r["request"]["text"]) for r in rows)
    assert 15 <= zh <= len(rows) - 15
    # No handwritten request contains the literal text of any generator template: strip
    # slots from every template and look for literal chunks of 18+ characters (6+ in Chinese); shared keywords are fine.
    chunks = set()
    for intent in INTENTS:
        for t in (*intent.en, *intent.zh):
            for part in re.split(r"\{\w+\}", normalize_text(t)):
                part = part.strip(" ,，:：.!")
                if len(part) >= 18 or (is_cjk(part) and len(part) >= 6):
                    chunks.add(part)
    for r in rows:
        text = normalize_text(r["request"]["text"])
        assert not [c for c in chunks if c in text], text
    generated = {normalize_text(r["request"]["text"]) for r in generate_examples(5000, seed=0)}
    assert not generated & {normalize_text(r["request"]["text"]) for r in rows}


def test_majority_plans_relabel_with_both_taste_flags() -> None:
    cat = default_catalog()
    rows = [
        {
            "request": {"text": "make a video of a cat", "attachments": []},
            "plan": ["wan.text_to_video"],
        },
        {
            "request": {"text": "film look please", "attachments": ["video"]},
            "plan": ["grading.film"],
        },
        {"request": {"text": "a poster", "attachments": []}, "plan": ["ideogram.text_to_image"]},
    ]
    out = majority_plans(rows, cat)
    assert [r["plan"] for r in out] == [
        ["wan.text_to_video", "audio.music"],
        ["runway.video_to_video", "audio.music"],
        ["ideogram.text_to_image"],
    ]
    assert rows[0]["plan"] == ["wan.text_to_video"]  # inputs untouched
    assert out[0]["request"] == rows[0]["request"]
