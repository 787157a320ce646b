"""Plan grammar FSM: accepts exactly the catalog's valid plans up to max_steps."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from studio_align.catalog import ATTACHMENT_KINDS, Catalog, Engine, default_catalog
from studio_align.models.tokenizer import Tokenizer
from studio_align.router.format import encode_plan, special_tokens
from studio_align.router.grammar import compile_grammar

TEXTS = ["make a video of a cat", "把这张图做成视频", "compose calm piano music", "电影调色"]


def _tok(catalog: Catalog):
    return Tokenizer.train(TEXTS, vocab_size=400, special_tokens=special_tokens(catalog))


ATTACHMENT_SETS = [
    list(c)
    for r in range(len(ATTACHMENT_KINDS) + 1)
    for c in itertools.combinations(ATTACHMENT_KINDS, r)
]


@pytest.mark.parametrize("max_steps", [1, 3])
def test_fsm_accepts_exactly_valid_plans(max_steps: int) -> None:
    cat = default_catalog()
    tok = _tok(cat)
    g = compile_grammar(cat, tok, max_steps=max_steps)
    n_checked = 0
    for atts in ATTACHMENT_SETS:
        for length in range(0, max_steps + 2):
            for plan in itertools.product(cat.names, repeat=length):
                ids = encode_plan(tok, plan)
                want = cat.is_valid(plan, atts) and 1 <= length <= max_steps
                assert g.accepts(ids, atts) == want, (plan, atts)
                n_checked += 1
    assert n_checked > 1000 if max_steps == 3 else n_checked > 50


def test_fsm_random_walks_only_emit_valid_plans() -> None:
    cat = default_catalog()
    tok = _tok(cat)
    g = compile_grammar(cat, tok, max_steps=4)
    rng = np.random.default_rng(0)
    steps = {i: s for s, i in zip(cat.names, g.step_ids, strict=True)}
    for _ in range(500):
        atts = ATTACHMENT_SETS[rng.integers(len(ATTACHMENT_SETS))]
        s, plan = g.init_state(atts), []
        while s != g.done_state:
            choices = np.flatnonzero(g.allowed[s])
            assert len(choices) > 0
            t = int(rng.choice(choices))
            if t in steps:
                plan.append(steps[t])
            else:
                assert t == g.eos_id
            s = int(g.next_state[s, t])
        assert cat.plan_problems(plan, atts) == [], (plan, atts)
        assert 1 <= len(plan) <= 4
        # after eos only pad, forever
        assert np.flatnonzero(g.allowed[g.done_state]).tolist() == [g.pad_id]


def test_fsm_blocks_unsatisfiable_first_step_and_eos() -> None:
    cat = default_catalog()
    tok = _tok(cat)
    g = compile_grammar(cat, tok)
    s0 = g.init_state([])
    assert not g.allowed[s0, tok.token_to_id("<step:wan.image_to_video>")]
    assert not g.allowed[s0, g.eos_id]  # no empty plan
    assert g.allowed[s0, tok.token_to_id("<step:wan.text_to_video>")]
    s_img = g.init_state(["image"])
    assert g.allowed[s_img, tok.token_to_id("<step:wan.image_to_video>")]
    # no text token is ever allowed
    text_ids = tok.encode("make a video")
    assert not g.allowed[:, text_ids].any()


def test_fsm_follows_plugin_engines() -> None:
    cat = default_catalog()
    cat.add(Engine("acme.audio_to_video", frozenset({"audio"}), "video"))
    tok = _tok(cat)
    g = compile_grammar(cat, tok)
    plan = ["acme.audio_to_video", "runway.video_to_video"]
    assert g.accepts(encode_plan(tok, plan), ["audio"])
    assert not g.accepts(encode_plan(tok, plan), [])
    assert g.accepts(encode_plan(tok, ["audio.music", *plan]), [])
