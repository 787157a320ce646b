"""Requests in other languages: every intent has them in every language, they keep their
plan, the rest of the data stays byte-identical, and none comes from a hand-written set."""

from __future__ import annotations

import random
import re

from router_lever_helpers import lever_changes

from studio_align.router import eval as packaged
from studio_align.router.format import is_cjk
from studio_align.simulate.router.foreign import (
    FOREIGN_LANGS,
    FOREIGN_SLOTS,
    FOREIGN_TEMPLATES,
    render_foreign,
)
from studio_align.simulate.router.phrases import INTENTS

SLOT = re.compile(r"\{(\w+)\}")


def test_every_intent_has_templates_in_every_language_and_each_fills() -> None:
    assert set(FOREIGN_TEMPLATES) == {i.name for i in INTENTS}
    for name, by_lang in FOREIGN_TEMPLATES.items():
        assert set(by_lang) == set(FOREIGN_LANGS), name
        for lang, templates in by_lang.items():
            for t in templates:
                assert set(SLOT.findall(t)) <= set(FOREIGN_SLOTS[lang]), (name, lang, t)
    rng = random.Random(0)
    for intent in INTENTS:
        for _ in range(20):
            assert "{" not in render_foreign(intent, rng)


def test_foreign_prob_replaces_its_share_keeping_plans_and_the_rest_identical() -> None:
    changed, n = lever_changes("foreign_prob", 0.1, seed=5)
    assert 0.07 < len(changed) / n < 0.13
    written = {t.split("{")[0][:6] for by in FOREIGN_TEMPLATES.values() for ts in by.values()
               for t in ts if not t.startswith("{")}  # fmt: skip
    starts = sum(x["request"]["text"][:6] in written for _, x in changed)
    assert starts > 0.5 * len(changed)  # most start with a template's own first words
    plans = {tuple(x["plan"]) for _, x in changed}
    assert len(plans) >= 20  # every kind of plan is written in the other languages


def test_no_foreign_request_or_filler_comes_from_a_hand_written_set() -> None:
    sets = {r["request"]["text"].lower().strip(" .!?。！？")
            for name in (*packaged.VAL_SETS, *packaged.EVAL_SETS) for r in packaged.load(name)}  # fmt: skip
    # phrases, not single words ("alegre", "落ち着いた" are anyone's)
    fills = [s for by in FOREIGN_SLOTS.values() for pool in by.values() for s in pool
             if len(s.split()) > 1 or (is_cjk(s) and len(s) > 5)]  # fmt: skip
    assert not [s for s in fills if any(s.lower() in t for t in sets)]
    rng = random.Random(1)
    rendered = {render_foreign(i, rng).lower() for i in INTENTS for _ in range(40)}
    assert not rendered & sets
