"""Styled requests: the demo generator's second voice, built step by step from `lexicon`.

`render_styled(intent, lang, rng)` writes a request for the intent's plan the way people
write to a creative tool rather than the way templates do:

- *compositional*: a first-step phrase (naming the attached file in words, `{att}`),
  then a connector and a follow-up phrase per later step, each from a large pool;
- *terse*: a one-word request for a one-step plan ("bgm", "P图");
- *brands*: a competitor product or an engine nickname for one of the plan's steps
  ("midjourney-style: ...", "可灵那种，...");
- *long*: a preamble about who is asking and why, and trailing details;
- *code-switching*: Chinese requests with words switched to English, slots filled from
  the other language's pool;
- casual casing; `requests.py` adds its typos and word dropout on top.

Probabilities are keyword arguments; everything is a pure function of `rng`. Styled
requests are training data only: the generator's held-out split keeps its own held-out
templates, so held-out figures stay comparable with earlier runs.
"""

from __future__ import annotations

import random
from typing import NamedTuple

from studio_align.simulate.router.lexicon import (
    ATT_REFS,
    BRAND_WRAPS,
    BRANDS,
    CODE_SWITCH,
    CONNECT,
    DETAILS,
    FIRST,
    LEX_SLOTS,
    PREAMBLES,
    TERSE,
    THEN,
)
from studio_align.simulate.router.lexicon_wide import (
    EXTRA_BRANDS,
    EXTRA_FIRST,
    EXTRA_TERSE,
    EXTRA_THEN,
    Pools,
)
from studio_align.simulate.router.phrases import GRADE, T2V, ZH_TO_EN_WORDS, Intent
from studio_align.simulate.router.slots import SLOTS


class Lexicon(NamedTuple):
    """The per-step pools a styled request is drawn from."""

    first: Pools
    then: Pools
    terse: Pools
    brands: dict[str, tuple[str, ...]]


def _wider(base: Pools, extra: Pools) -> Pools:
    return {step: {lang: phrases + extra.get(step, {}).get(lang, ()) for lang, phrases in by.items()}
            for step, by in base.items()}  # fmt: skip


BASE = Lexicon(FIRST, THEN, TERSE, BRANDS)
# `lexicon_wide`'s artefact, technique and use names added to every pool
WIDE = Lexicon(
    _wider(FIRST, EXTRA_FIRST),
    _wider(THEN, EXTRA_THEN),
    _wider(TERSE, EXTRA_TERSE),
    {step: names + EXTRA_BRANDS.get(step, ()) for step, names in BRANDS.items()},
)

ASKS = {
    "en": ("", "", "", "pls: ", "need: ", "can you do this: ", "i'd like ", "looking for ", "could i get ",
           "request - ", "yo, ", "help! "),
    "zh": ("", "", "", "帮我", "想要", "能不能", "麻烦", "求", "请帮忙", "急！", "整一个", "在吗，"),
}  # fmt: skip
SONG_VIDEO = {
    "en": ("a music video for {att} with {subject}", "visuals for {att}: {subject}", "footage of {subject} to go with {att}",
           "an mv for {att}, {subject}"),
    "zh": ("给{att}做个MV，{subject}", "{att}配个画面：{subject}", "为{att}做视频，画面是{subject}", "{att}的MV，要{subject}"),
}  # fmt: skip


def _fill(text: str, lang: str, rng: random.Random, mix_prob: float) -> str:
    for pools in (LEX_SLOTS, SLOTS):
        for name, by_lang in pools.items():
            key = "{" + name + "}"
            while key in text:
                src = lang if rng.random() >= mix_prob else ("zh" if lang == "en" else "en")
                text = text.replace(key, rng.choice(by_lang[src]), 1)
    return text


def _att_kind(step: str, attachments: tuple[str, ...]) -> str:
    if step == GRADE:
        return "video" if "video" in attachments else "image"
    if step == T2V:
        return "audio"
    return {"ideogram.edit_image": "image", "wan.image_to_video": "image",
            "ecommerce.product_shot": "image", "runway.video_to_video": "video"}.get(step, "image")  # fmt: skip


def _core(intent: Intent, lang: str, rng: random.Random, lex: Lexicon) -> str:
    first, *rest = intent.plan
    if first == T2V and "audio" in intent.attachments:
        text = rng.choice(SONG_VIDEO[lang])
    else:
        text = rng.choice(lex.first[first][lang])
    if "{att}" in text:
        text = text.replace(
            "{att}", rng.choice(ATT_REFS[_att_kind(first, intent.attachments)][lang])
        )
    for step in rest:
        text += rng.choice(CONNECT[lang]) + rng.choice(lex.then[step][lang])
    return text


def _code_switch(text: str, rng: random.Random) -> str:
    table = {**ZH_TO_EN_WORDS, **CODE_SWITCH}
    words = [w for w in table if w in text]
    rng.shuffle(words)
    for w in words[: rng.choice([1, 1, 2])]:
        text = text.replace(w, table[w], 1)
    return text


def render_styled(
    intent: Intent,
    lang: str,
    rng: random.Random,
    *,
    terse_prob: float = 0.12,
    brand_prob: float = 0.15,
    long_prob: float = 0.15,
    switch_prob: float = 0.25,
    mix_prob: float = 0.12,
    lexicon: Lexicon = BASE,
) -> str:
    """One styled request for `intent` in `lang` (see module docstring); `requests.py` adds
    typos and dropout on top, as it does for template requests. `lexicon=WIDE` draws
    from `lexicon_wide`'s names too."""
    if len(intent.plan) == 1 and rng.random() < terse_prob:
        text = rng.choice(lexicon.terse[intent.plan[0]][lang])
    else:
        text = rng.choice(ASKS[lang]) + _core(intent, lang, rng, lexicon)
        if rng.random() < brand_prob:
            step = rng.choice(intent.plan)
            brand = rng.choice(lexicon.brands[step])
            text = rng.choice(BRAND_WRAPS[lang]).replace("{brand}", brand) + text
        if rng.random() < long_prob:
            sep = "，" if lang == "zh" else ", "
            text = rng.choice(PREAMBLES[lang]) + ("" if lang == "zh" else " ") + text
            text += sep + rng.choice(DETAILS[lang])
    text = _fill(text, lang, rng, mix_prob)
    if lang == "zh" and rng.random() < switch_prob:
        text = _code_switch(text, rng)
    if lang == "en" and rng.random() < 0.2:
        text = text[:1].upper() + text[1:]
    return text
