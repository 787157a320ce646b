"""The shared check of a request-generator lever: it changes only the requests it touches,
keeps their plan and attachments, and leaves the held-out split alone."""

from __future__ import annotations

from typing import Any

from studio_align.router import eval as packaged
from studio_align.router.format import is_cjk
from studio_align.simulate.router.requests import generate_examples

Pair = tuple[dict[str, Any], dict[str, Any]]
Phrases = dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]]


def hand_written_texts() -> set[str]:
    """Every request of the packaged validation and evaluation sets, lower-cased: what no
    lever may copy."""
    return {r["request"]["text"].lower()
            for name in (*packaged.VAL_SETS, *packaged.EVAL_SETS) for r in packaged.load(name)}  # fmt: skip


def lever_changes(
    lever: str, prob: float, *, seed: int, n: int = 3000, **fixed: float
) -> tuple[list[Pair], int]:
    """(base, levered) pairs that differ with `lever=prob` against `lever=0`, and `n`;
    `fixed` sets other levers alike in both (one that rewrites the same slot). Each
    changed pair keeps its plan and attachments; held-out data ignores the lever."""
    base = generate_examples(n, seed=seed, **{lever: 0.0}, **fixed)
    levered = generate_examples(n, seed=seed, **{lever: prob}, **fixed)
    changed = [(b, x) for b, x in zip(base, levered, strict=True) if b != x]
    for b, x in changed:
        assert (b["plan"], b["request"]["attachments"]) == (x["plan"], x["request"]["attachments"])
    held = [generate_examples(200, seed=seed, split="heldout", **{lever: p}) for p in (None, 0.0)]
    assert held[0] == held[1]  # held-out phrasing stays the templates'
    return changed, n


def swapped_plans(
    changed: list[Pair], old: dict[str, tuple[str, ...]], new: dict[str, tuple[str, ...]]
) -> set[tuple[str, ...]]:
    """Check that each changed request lost a phrase of `old` and gained one of `new` in
    that phrase's language; the plans of the changed requests."""
    plans = set()
    for b, x in changed:
        gone = [s for pool in old.values() for s in pool
                if s in b["request"]["text"] and s not in x["request"]["text"]]  # fmt: skip
        assert gone, (b["request"]["text"], x["request"]["text"])
        lang = "zh" if is_cjk(gone[0]) else "en"
        assert any(s in x["request"]["text"] for s in new[lang]), x["request"]["text"]
        plans.add(tuple(x["plan"]))
    return plans


def kinds_in(text: str, phrases: Phrases) -> set[str]:
    """The kinds of a lever's `PHRASES` (kind -> language -> (suffixes, prefixes)) whose
    phrase, without its separator, is in `text`."""
    return {kind for kind, by_lang in phrases.items() for pools in by_lang.values()
            for pool in pools for s in pool if s.strip(" .-，。：:") in text}  # fmt: skip


def check_added_phrases(
    changed: list[Pair], phrases: Phrases, names: dict[str, set[str]], *, min_added: int
) -> None:
    """Each changed request keeps its words, grows by more than `min_added` characters, holds
    a phrase of `phrases`, and no phrase's kind names (`names`: kind -> steps) a step of its
    plan: a lever that names a medium never names one the plan makes."""
    for b, x in changed:
        before, text = b["request"]["text"], x["request"]["text"]
        assert before.rstrip("。.!！ ")[1:] in text and len(text) > len(before) + min_added, text
        kinds = kinds_in(text, phrases)
        assert kinds, text
        for kind in kinds:
            assert not set(names.get(kind, ())) & set(x["plan"]), (kind, x["plan"], text)


def check_phrase_pools(
    phrases: dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]],
) -> None:
    """A lever's `PHRASES` (kind -> language -> (suffixes, prefixes)): both languages and
    both positions for every kind, each phrase in its language, and none a substring of a
    hand-written request (a lever must not teach the sets' own sentences)."""
    written = hand_written_texts()
    for kind, by_lang in phrases.items():
        assert set(by_lang) == {"en", "zh"}, kind
        for lang, (suffixes, prefixes) in by_lang.items():
            assert prefixes and suffixes, (kind, lang)
            for s in (*prefixes, *suffixes):
                assert is_cjk(s) == (lang == "zh"), s
                core = s.strip(" .-，。：:").lower()
                assert not any(core in t for t in written), s
