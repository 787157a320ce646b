"""The colloquial rewriting lever: chat-box text, same labels, the rest of the data untouched."""

from __future__ import annotations

import random

from studio_align.catalog import default_catalog
from studio_align.router.format import is_cjk
from studio_align.simulate.router.colloquial import ZH_ENDINGS, colloquialize
from studio_align.simulate.router.requests import generate_examples


def test_colloquial_rewrites_change_most_requests_in_both_languages() -> None:
    rng = random.Random(0)
    zh = [
        "帮我生成一张雪山日出的图片",
        "请把这段视频做成动漫风格，然后配上背景音乐",
        "做一个咖啡店的海报",
    ]
    en = ["please make a video of a cat, then add music", "generate an image of a red car for you"]
    for texts, lang in ((zh, "zh"), (en, "en")):
        outs = [colloquialize(t, lang, rng) for t in texts for _ in range(20)]
        changed = sum(
            o != t for o, t in zip(outs, [t for t in texts for _ in range(20)], strict=True)
        )
        assert changed >= 0.8 * len(outs), lang
        assert len(set(outs)) >= len(outs) // 2  # varied, not one rewrite per text
    assert any(o.endswith(ZH_ENDINGS) for o in (colloquialize(zh[0], "zh", rng) for _ in range(20)))


def test_rewrites_keep_the_language_and_are_pure_functions_of_the_rng() -> None:
    text = "帮我生成一段海浪的视频"
    a = [colloquialize(text, "zh", random.Random(k)) for k in range(30)]
    assert a == [colloquialize(text, "zh", random.Random(k)) for k in range(30)]
    assert all(is_cjk(t) for t in a)
    assert colloquialize("a cat", "zh", random.Random(0)) == "a cat"  # no Chinese: untouched


def test_lever_rewrites_only_text_and_leaves_the_rest_of_the_data_unchanged() -> None:
    base = generate_examples(600, seed=5, colloquial_prob=0.0)
    lever = generate_examples(600, seed=5, colloquial_prob=0.4)
    assert [r["plan"] for r in base] == [r["plan"] for r in lever]
    assert [r["request"]["attachments"] for r in base] == [
        r["request"]["attachments"] for r in lever
    ]
    changed = sum(a != b for a, b in zip(base, lever, strict=True))
    assert 0.25 * 600 < changed < 0.45 * 600
    cat = default_catalog()
    assert all(cat.is_valid(r["plan"], r["request"]["attachments"]) for r in lever)
    # held-out data never gets the lever unless asked
    held = generate_examples(100, seed=5, split="heldout")
    assert held == generate_examples(100, seed=5, split="heldout", colloquial_prob=0.0)


def test_lever_can_be_limited_to_one_language() -> None:
    base = generate_examples(300, seed=6, colloquial_prob=0.0)
    zh_only = generate_examples(300, seed=6, colloquial_prob=0.5, colloquial_langs=("zh",))
    for a, b in zip(base, zh_only, strict=True):
        if not is_cjk(a["request"]["text"]):
            assert a == b  # an English request is never rewritten
    assert any(a != b for a, b in zip(base, zh_only, strict=True))
