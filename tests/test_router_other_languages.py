"""Requests in other languages (`foreign`) and other ways of writing Chinese (`dialects`):
every intent has them in every language, they keep their plan, the rest of the data stays
byte-identical, and none comes from a hand-written set."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from router_lever_helpers import hand_written_texts, lever_changes

from studio_align.router.format import is_cjk
from studio_align.simulate.router import dialects, foreign
from studio_align.simulate.router.phrases import INTENTS, Intent

SLOT = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Lever:
    prob: str
    langs: tuple[str, ...]
    templates: dict[str, dict[str, tuple[str, ...]]]
    slots: dict[str, dict[str, tuple[str, ...]]]
    render: Callable[[Intent, random.Random], str]


LEVERS = {
    "foreign": Lever("foreign_prob", foreign.FOREIGN_LANGS, foreign.FOREIGN_TEMPLATES,
                     foreign.FOREIGN_SLOTS, foreign.render_foreign),
    "dialect": Lever("dialect_prob", dialects.DIALECTS, dialects.DIALECT_TEMPLATES,
                     dialects.DIALECT_SLOTS, dialects.render_dialect),
}  # fmt: skip


@pytest.fixture(params=sorted(LEVERS))
def lev(request: pytest.FixtureRequest) -> Lever:
    return LEVERS[request.param]


def test_every_intent_has_templates_in_every_language_and_each_fills(lev: Lever) -> None:
    assert set(lev.templates) == {i.name for i in INTENTS}
    for name, by_lang in lev.templates.items():
        assert set(by_lang) == set(lev.langs), name
        for lang, templates in by_lang.items():
            for t in templates:
                assert set(SLOT.findall(t)) <= set(lev.slots[lang]), (name, lang, t)
    rng = random.Random(0)
    for intent in INTENTS:
        for _ in range(20):
            assert "{" not in lev.render(intent, rng)


def test_the_lever_replaces_its_share_keeping_plans_and_the_rest_identical(lev: Lever) -> None:
    changed, n = lever_changes(lev.prob, 0.1, seed=5)
    assert 0.07 < len(changed) / n < 0.13
    written = {t.split("{")[0][:6] for by in lev.templates.values() for ts in by.values()
               for t in ts if not t.startswith("{")}  # fmt: skip
    starts = sum(x["request"]["text"][:6] in written for _, x in changed)
    assert starts > 0.5 * len(changed)  # most start with a template's own first words
    plans = {tuple(x["plan"]) for _, x in changed}
    assert len(plans) >= 20  # every kind of plan is written in the other languages


def test_no_request_or_filler_comes_from_a_hand_written_set(lev: Lever) -> None:
    sets = {t.strip(" .!?。！？") for t in hand_written_texts()}
    # phrases, not single words ("alegre", "落ち着いた" are anyone's)
    fills = [s for by in lev.slots.values() for pool in by.values() for s in pool
             if len(s.split()) > 1 or (is_cjk(s) and len(s) > 5)]  # fmt: skip
    assert not [s for s in fills if any(s.lower() in t for t in sets)]
    rng = random.Random(1)
    rendered = {lev.render(i, rng).lower() for i in INTENTS for _ in range(40)}
    assert not rendered & sets
