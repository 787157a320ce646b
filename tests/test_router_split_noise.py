"""Segmentation noise on the router's training requests (`format.encode_prompt`)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from studio_align.catalog import default_catalog
from studio_align.errors import ConfigError
from studio_align.router.format import (
    build_tokenizer,
    encode_prompt,
    normalize_text,
    split_cuts,
)
from studio_align.router.task import RouterTask
from studio_align.simulate.router.requests import generate_examples
from studio_align.tasks import StartingPoint

CAT = default_catalog()
EXAMPLES = generate_examples(200, seed=0)
TOK = build_tokenizer([e["request"]["text"] for e in EXAMPLES], CAT, vocab_size=600)
REQ = {"text": "Make a cinematic video from this photo, 加上背景音乐", "attachments": ["image"]}


def test_cuts_fall_inside_words_of_two_or_more_characters() -> None:
    text = normalize_text(REQ["text"])
    words = [(m.start(), m.end()) for m in re.finditer(r"\w{2,}", text)]
    cuts = split_cuts(text, np.random.default_rng(0), 1.0)
    assert len(cuts) == len(words)  # every word cut once at probability 1
    assert all(a < c < b for c, (a, b) in zip(cuts, words, strict=True))
    assert split_cuts("a b c", np.random.default_rng(0), 1.0) == []


def test_noise_keeps_the_text_and_changes_only_its_segmentation() -> None:
    plain = encode_prompt(TOK, REQ)
    rng = np.random.default_rng(1)
    noisy = [encode_prompt(TOK, REQ, rng=rng, split_prob=0.5) for _ in range(8)]
    assert any(n != plain for n in noisy)
    text = normalize_text(REQ["text"])
    for n in noisy:
        assert n[0] == plain[0] and n[-2:] == plain[-2:]  # <bos> ... <att:image> <plan>
        assert TOK.decode(n[1:-2]) == text  # byte-level: nothing lost or added
        assert len(n) >= len(plain)


def test_off_draws_nothing_and_equals_the_plain_encoding() -> None:
    rng = np.random.default_rng(3)
    before = rng.bit_generator.state
    assert encode_prompt(TOK, REQ, rng=rng, split_prob=0.0) == encode_prompt(TOK, REQ)
    assert rng.bit_generator.state == before


def test_router_task_noise_is_seeded_and_leaves_plans_alone() -> None:
    start = StartingPoint(model=None, tokenizer=TOK)
    plain = RouterTask(CAT).sft_pairs(start, EXAMPLES[:50])
    a = RouterTask(CAT, split_prob=0.3, split_seed=7).sft_pairs(start, EXAMPLES[:50])
    b = RouterTask(CAT, split_prob=0.3, split_seed=7).sft_pairs(start, EXAMPLES[:50])
    c = RouterTask(CAT, split_prob=0.3, split_seed=8).sft_pairs(start, EXAMPLES[:50])
    assert a == b and a != c
    assert [p[1] for p in a] == [p[1] for p in plain]
    assert sum(x[0] != y[0] for x, y in zip(a, plain, strict=True)) > 10
    with pytest.raises(ConfigError, match="split_prob"):
        RouterTask(CAT, split_prob=1.0)
