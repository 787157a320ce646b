"""Deterministic generator of labelled creative requests (the embedded demo data).

Each example is a docs/design.md labelled routing example,
`{"request": {"text", "attachments"}, "plan": [...]}`, drawn from the intents of
`phrases.py`: about half Chinese and half English (in training, 5 % in five other languages:
`foreign.py`), single steps and the common 2- and 3-step plans, with attachments where the
plan needs them.

Variation, so a router cannot pass by memorising strings:
- many templates per intent and language, filled from slot pools (subjects, styles,
  durations, moods, looks, products, ...);
- mixed language: a slot filled from the other language's pool, or Chinese product
  words switched to English (`视频` -> `video`);
- synonyms swapped in (`photo` -> `pic`, `视频` -> `短片`) and clauses reordered;
- word dropout (training only);
- politeness prefixes and suffixes, random capitalisation, and typos (adjacent swap,
  dropped or doubled letter in English; a dropped character in Chinese).

Splits: `split="train"` uses each intent's training templates, `split="heldout"` only
the held-out templates (phrasings never seen in training). Everything is a pure
function of the seed.
"""

from __future__ import annotations

import random
import string
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, Unpack

from studio_align.simulate.router.colloquial import colloquialize
from studio_align.simulate.router.color_fix import render_fix
from studio_align.simulate.router.corrections import retract, retract_decoys, switch, switch_decoys
from studio_align.simulate.router.declines import add_decline
from studio_align.simulate.router.destinations import destination_or_twin
from studio_align.simulate.router.dialects import render_dialect
from studio_align.simulate.router.film_words import with_film_words
from studio_align.simulate.router.foreign import render_foreign
from studio_align.simulate.router.levers import (
    ANIME_PROB,
    ANIME_SUBJECT_PROB,
    BUSY_PROB,
    COLLOQUIAL_PROB,
    CONTEXT_PROB,
    CORRECTION_PROB,
    DECLINE_PROB,
    DESTINATION_PROB,
    DIALECT_PROB,
    FILM_PROB,
    FIX_PROB,
    FOREIGN_PROB,
    INTENT_REPEATS,
    LETTERING_PROB,
    LONG_PROB,
    PALETTE_PROB,
    PROMPT_PROB,
    REFUSAL_PROB,
    SPOKEN_PROB,
    STYLED_PROB,
    STYLED_TYPO_PROB,
    TEXT_PROB,
    TWIN_KINDS,
    TWIN_PROB,
    WIDE_PROB,
    Split,
    lever,
    swap_first,
    with_context,
)
from studio_align.simulate.router.long_messages import with_long_context
from studio_align.simulate.router.noise import (
    drop_words,
    shuffle_clauses,
    synonyms,
    typo_en,
    typo_zh,
)
from studio_align.simulate.router.palette import with_palette
from studio_align.simulate.router.phrases import (
    CONNECTORS,
    FILLERS,
    FIRST_ATTACHMENTS,
    FIRST_CLAUSES,
    HELDOUT_PER_LANG,
    INTENTS,
    PREFIXES,
    SLOTS,
    SUFFIXES,
    THEN_CLAUSES,
    ZH_TO_EN_WORDS,
    Intent,
)
from studio_align.simulate.router.prompt_style import render_prompt
from studio_align.simulate.router.refusals import add_refusal
from studio_align.simulate.router.rendered_text import with_lettering, with_rendered_text
from studio_align.simulate.router.slots import (
    ANIME_STYLES,
    ANIME_SUBJECTS,
    BUSY_SUBJECTS,
    SPOKEN_LINES,
)
from studio_align.simulate.router.styles import BASE, WIDE, Lexicon, render_styled

LANGS = ("en", "zh")


def templates(intent: Intent, lang: str, split: Split) -> tuple[str, ...]:
    """The templates of one intent, language and split."""
    pool: tuple[str, ...] = intent.en if lang == "en" else intent.zh
    return pool[:-HELDOUT_PER_LANG] if split == "train" else pool[-HELDOUT_PER_LANG:]


def _fill(template: str, lang: str, rng: random.Random, mix_prob: float) -> str:
    out = template
    for name, pools in SLOTS.items():
        key = "{" + name + "}"
        while key in out:
            src = lang if rng.random() >= mix_prob else ("zh" if lang == "en" else "en")
            out = out.replace(key, rng.choice(pools[src]), 1)
    return out


def _pool(options: tuple[str, ...], split: Split) -> tuple[str, ...]:
    """Compositional pools hold their last entry out of training."""
    return options[:-1] if split == "train" else options[-1:]


def composable(intent: Intent) -> bool:
    """Plans whose steps all have clause pools and whose attachments are the ones the
    first clause assumes (so "animate this photo" is only composed with an image)."""
    first = intent.plan[0]
    return (
        first in FIRST_CLAUSES
        and tuple(intent.attachments) == FIRST_ATTACHMENTS[first]
        and all(s in THEN_CLAUSES for s in intent.plan[1:])
    )


def compose_template(intent: Intent, lang: str, rng: random.Random, split: Split) -> str:
    """A template built clause by clause for the intent's plan (see phrases)."""
    first, *rest = intent.plan
    parts = [rng.choice(_pool(FIRST_CLAUSES[first][lang], split))]
    for step in rest:
        parts.append(rng.choice(_pool(CONNECTORS[lang], split)))
        parts.append(rng.choice(_pool(THEN_CLAUSES[step][lang], split)))
    return "".join(parts)


def render_request(
    intent: Intent,
    lang: str,
    rng: random.Random,
    *,
    split: Split = "train",
    mix_prob: float = 0.12,
    switch_prob: float = 0.15,
    typo_prob: float = 0.12,
    synonym_prob: float = 0.35,
    shuffle_prob: float = 0.1,
    compose_prob: float = 0.0,
    filler_prob: float = 0.0,
    dropout_prob: float = 0.0,
) -> str:
    """One request text for `intent` in `lang` (see module docstring for the noise)."""
    if composable(intent) and rng.random() < compose_prob:
        template = compose_template(intent, lang, rng, split)
    else:
        template = rng.choice(templates(intent, lang, split))
    text = _fill(template, lang, rng, mix_prob)
    if rng.random() < filler_prob:
        filler = rng.choice(FILLERS[lang])
        sep = "，" if lang == "zh" else ", "
        text = filler + sep + text if rng.random() < 0.5 else text + sep + filler
    text = synonyms(text, lang, rng, synonym_prob)
    if rng.random() < shuffle_prob:
        text = shuffle_clauses(text, rng)
    if lang == "zh" and rng.random() < switch_prob:
        word = rng.choice([w for w in ZH_TO_EN_WORDS if w in text] or [""])
        if word:
            text = text.replace(word, ZH_TO_EN_WORDS[word], 1)
    text = rng.choice(PREFIXES[lang]) + text + rng.choice(SUFFIXES[lang])
    if rng.random() < typo_prob:
        text = typo_en(text, rng) if lang == "en" else typo_zh(text, rng)
    if rng.random() < dropout_prob:
        text = drop_words(text, lang, rng)
    if lang == "en" and rng.random() < 0.3:
        text = text[:1].upper() + text[1:]
    if rng.random() < 0.05:
        text = text.rstrip(string.punctuation + "！～，") + rng.choice(["?", ".", "…", " :)"])
    return text


def make_example(intent: Intent, text: str) -> dict[str, Any]:
    return {
        "request": {"text": text, "attachments": list(intent.attachments)},
        "plan": list(intent.plan),
    }


def generate_examples(
    n: int,
    *,
    seed: int = 0,
    split: Split = "train",
    intents: Sequence[Intent] = INTENTS,
    intent_repeats: Mapping[str, int] | None = None,
    zh_fraction: float = 0.5,
    compose_prob: float | None = None,
    filler_prob: float | None = None,
    dropout_prob: float | None = None,
    styled_prob: float | None = None,
    colloquial_prob: float | None = None,
    colloquial_langs: Sequence[str] = LANGS,
    wide_prob: float | None = None,
    refusal_prob: float | None = None,
    correction_prob: float | None = None,
    prompt_prob: float | None = None,
    busy_prob: float | None = None,
    anime_prob: float | None = None,
    anime_subject_prob: float | None = None,
    context_prob: float | None = None,
    spoken_prob: float | None = None,
    foreign_prob: float | None = None,
    dialect_prob: float | None = None,
    fix_prob: float | None = None,
    text_prob: float | None = None,
    lettering_prob: float | None = None,
    film_prob: float | None = None,
    palette_prob: float | None = None,
    long_prob: float | None = None,
    decline_prob: float | None = None,
    destination_prob: float | None = None,
    twin_prob: float | None = None,
    twin_kinds: Sequence[str] = TWIN_KINDS,
) -> list[dict[str, Any]]:
    """`n` labelled routing examples, cycling through intents so each is covered evenly,
    or, in training, `intent_repeats[name]` times a cycle (default `INTENT_REPEATS`).

    Training data mixes whole-sentence templates with clause-by-clause compositions
    (`compose_prob`, default 0.5), irrelevant filler phrases (`filler_prob`, 0.15) and
    word dropout (`dropout_prob`, 0.15), and styled requests (`styled_prob`, default
    `STYLED_PROB`: `styles.render_styled`, with typos at `STYLED_TYPO_PROB`);
    held-out data uses only the held-out whole-sentence templates and none of these
    unless asked. `colloquial_prob` (default `COLLOQUIAL_PROB` in training, 0 otherwise)
    rewrites that fraction of requests in `colloquial_langs` as chat-box text
    (`colloquial`). `wide_prob` (default `WIDE_PROB` in training, 0 otherwise)
    replaces that fraction of requests by styled requests from the wider lexicon.
    `refusal_prob` (default `REFUSAL_PROB` in training, 0 otherwise) adds to that fraction
    a refusal of a step the plan lacks (`refusals`). `correction_prob` (default
    `CORRECTION_PROB` in training, 0 otherwise) puts that fraction of requests after a
    request the writer takes back (`corrections`). `prompt_prob` (default `PROMPT_PROB`
    in training, 0 otherwise) replaces that fraction by a prompt-style request
    (`prompt_style`: tag prompts and structured briefs). `busy_prob` (default `BUSY_PROB`
    in training, 0 otherwise) swaps that fraction's subject for a busy one (`BUSY_SUBJECTS`).
    `anime_prob` (default `ANIME_PROB` in training, 0 otherwise) swaps that fraction's style
    word for an anime-family one (`ANIME_STYLES`), and `anime_subject_prob` (default
    `ANIME_SUBJECT_PROB` in training, 0 otherwise) its subject for one drawn the anime way
    (`ANIME_SUBJECTS`). `context_prob` (default `CONTEXT_PROB` in
    training, 0 otherwise) puts a line that names no medium before or after that fraction
    (`CONTEXT_LINES`). `spoken_prob` (default `SPOKEN_PROB` in training, 0 otherwise) swaps
    that fraction's spoken line for one of `SPOKEN_LINES`. `foreign_prob` (default
    `FOREIGN_PROB` in training, 0 otherwise) replaces that fraction, last, by a request in
    another language (`foreign`), and `dialect_prob` (default `DIALECT_PROB` in training,
    0 otherwise) that fraction, after it, by one in Cantonese or pinyin (`dialects`).
    `fix_prob` (default `FIX_PROB` in training, 0 otherwise) rewrites that fraction of the
    grade requests on an upload as a colour problem to fix (`color_fix`). `text_prob`
    (default `TEXT_PROB` in training, 0 otherwise) adds to that fraction quoted words for
    one step of the plan to draw, show, sing or speak (`rendered_text`), and
    `lettering_prob` (default `LETTERING_PROB` in training, 0 otherwise) swaps that
    fraction's subject, or an edit's change, for one whose point is words to render
    (`rendered_text.with_lettering`). `film_prob`
    (default `FILM_PROB` in training, 0 otherwise) adds to that fraction a phrase of
    cinema's words as a look for a step that makes something new (`film_words`), and
    `palette_prob` (default `PALETTE_PROB` in training, 0 otherwise) the colours wanted to
    that fraction of the requests that make a picture from words (`palette`). `long_prob`
    (default `LONG_PROB` in training, 0 otherwise) puts that fraction inside a long message
    (`long_messages`), before the foreign and dialect levers replace theirs.
    `decline_prob` (default `DECLINE_PROB` in training, 0 otherwise) adds to that fraction
    a sentence declining, with its reason, a step the plan lacks (`declines`), and
    `destination_prob` (default `DESTINATION_PROB` in training, 0 otherwise) a phrase saying
    what the result is for, a medium the plan does not make (`destinations`); `twin_prob`
    (default `TWIN_PROB` in training, 0 otherwise) turns that share of those into their
    twin, which asks for that medium, labelled with the plan that makes it too, for the
    destination kinds in `twin_kinds` (default `TWIN_KINDS`).
    """
    # each lever draws from its own stream: the other draws, hence the rest of the data,
    # stay as without it
    context_prob, xrng = lever(context_prob, CONTEXT_PROB, "context", seed, split)
    anime_prob, arng = lever(anime_prob, ANIME_PROB, "anime", seed, split)
    anime_subject_prob, asrng = lever(
        anime_subject_prob, ANIME_SUBJECT_PROB, "anime_subject", seed, split
    )
    spoken_prob, lrng = lever(spoken_prob, SPOKEN_PROB, "spoken", seed, split)
    busy_prob, brng = lever(busy_prob, BUSY_PROB, "busy", seed, split)
    prompt_prob, prng = lever(prompt_prob, PROMPT_PROB, "prompt", seed, split)
    correction_prob, krng = lever(correction_prob, CORRECTION_PROB, "correction", seed, split)
    refusal_prob, rrng = lever(refusal_prob, REFUSAL_PROB, "refusal", seed, split)
    wide_prob, wrng = lever(wide_prob, WIDE_PROB, "wide", seed, split)
    colloquial_prob, crng = lever(colloquial_prob, COLLOQUIAL_PROB, "colloquial", seed, split)
    foreign_prob, frng = lever(foreign_prob, FOREIGN_PROB, "foreign", seed, split)
    dialect_prob, drng = lever(dialect_prob, DIALECT_PROB, "dialect", seed, split)
    fix_prob, fxrng = lever(fix_prob, FIX_PROB, "fix", seed, split)
    text_prob, trng = lever(text_prob, TEXT_PROB, "text", seed, split)
    lettering_prob, ltrng = lever(lettering_prob, LETTERING_PROB, "lettering", seed, split)
    film_prob, fmrng = lever(film_prob, FILM_PROB, "film", seed, split)
    palette_prob, plrng = lever(palette_prob, PALETTE_PROB, "palette", seed, split)
    long_prob, lgrng = lever(long_prob, LONG_PROB, "long", seed, split)
    decline_prob, dcrng = lever(decline_prob, DECLINE_PROB, "decline", seed, split)
    destination_prob, dsrng = lever(destination_prob, DESTINATION_PROB, "destination", seed, split)
    twin_prob, twrng = lever(twin_prob, TWIN_PROB, "twin", seed, split)
    probs = {lang: colloquial_prob if lang in colloquial_langs else 0.0 for lang in LANGS}
    if styled_prob is None:
        styled_prob = STYLED_PROB if split == "train" else 0.0
    train = split == "train"
    if dropout_prob is None:
        dropout_prob = 0.15 if train else 0.0
    if compose_prob is None:
        compose_prob = 0.5 if split == "train" else 0.0
    if filler_prob is None:
        filler_prob = 0.15 if split == "train" else 0.0
    if intent_repeats is None:
        intent_repeats = INTENT_REPEATS if train else {}
    cycle = _cycle(intents, intent_repeats)
    rng = random.Random(f"demo:{seed}:{split}")
    out = []
    order: list[Intent] = []
    for _ in range(n):
        if not order:
            order = list(cycle)
            rng.shuffle(order)
        intent = order.pop()
        lang = "zh" if rng.random() < zh_fraction else "en"
        if styled_prob > 0 and rng.random() < styled_prob:
            text = _styled(intent, lang, rng, BASE)
        else:
            text = render_request(
                intent,
                lang,
                rng,
                split=split,
                compose_prob=compose_prob,
                filler_prob=filler_prob,
                dropout_prob=dropout_prob,
            )
        if wide_prob > 0 and wrng.random() < wide_prob:  # drawn after: `rng` is unchanged
            text = _styled(intent, lang, wrng, WIDE)
        if prompt_prob > 0 and prng.random() < prompt_prob:
            text = render_prompt(intent, lang, prng)
        if fix_prob > 0 and fxrng.random() < fix_prob:
            text = render_fix(intent, lang, fxrng) or text
        if busy_prob > 0 and brng.random() < busy_prob:
            text = swap_first(text, SLOTS["subject"], BUSY_SUBJECTS, brng)
        if anime_prob > 0 and arng.random() < anime_prob:
            text = swap_first(text, SLOTS["style"], ANIME_STYLES, arng)
        if anime_subject_prob > 0 and asrng.random() < anime_subject_prob:
            text = swap_first(text, SLOTS["subject"], ANIME_SUBJECTS, asrng)
        if lettering_prob > 0 and ltrng.random() < lettering_prob:
            text = with_lettering(text, lang, ltrng)
        if spoken_prob > 0 and lrng.random() < spoken_prob:
            text = swap_first(text, SLOTS["line"], SPOKEN_LINES, lrng)
        if film_prob > 0 and fmrng.random() < film_prob:
            text = with_film_words(intent, text, lang, fmrng)
        if palette_prob > 0 and plrng.random() < palette_prob:
            text = with_palette(intent, text, lang, plrng)
        if context_prob > 0 and xrng.random() < context_prob:
            text = with_context(text, lang, xrng)
        if text_prob > 0 and trng.random() < text_prob:
            text = with_rendered_text(intent, text, lang, trng)
        if correction_prob > 0 and krng.random() < correction_prob:
            text = _corrected(intent, text, lang, krng, intents, split)
        text = _colloquial(text, lang, crng, probs[lang])
        if refusal_prob > 0 and rrng.random() < refusal_prob:
            text = add_refusal(text, intent.plan, intent.attachments, lang, rrng)
        if decline_prob > 0 and dcrng.random() < decline_prob:
            text = add_decline(text, intent.plan, intent.attachments, lang, dcrng)
        if destination_prob > 0 and dsrng.random() < destination_prob:
            intent, text = destination_or_twin(
                intent,
                text,
                lang,
                dsrng,
                intents=intents,
                twin_prob=twin_prob,
                twin_rng=twrng,
                twin_kinds=twin_kinds,
            )
        if long_prob > 0 and lgrng.random() < long_prob:
            text = with_long_context(text, intent.plan, lang, lgrng)
        if foreign_prob > 0 and frng.random() < foreign_prob:
            text = render_foreign(intent, frng)
        if dialect_prob > 0 and drng.random() < dialect_prob:
            text = render_dialect(intent, drng)
        out.append(make_example(intent, text))
    return out


def _styled(intent: Intent, lang: str, rng: random.Random, lexicon: Lexicon) -> str:
    text = render_styled(intent, lang, rng, lexicon=lexicon)
    if rng.random() < STYLED_TYPO_PROB:
        text = typo_en(text, rng) if lang == "en" else typo_zh(text, rng)
    return text


def _corrected(
    intent: Intent,
    text: str,
    lang: str,
    rng: random.Random,
    intents: Sequence[Intent],
    split: Split,
) -> str:
    """`text` after a request the writer takes back: half the time (where a plan with one
    step more exists) that request drops its extra step, else another plan is switched away
    from."""
    fuller = retract_decoys(intent, intents)
    if fuller and rng.random() < 0.5:
        other = rng.choice(fuller)
        (step,) = [s for s in other.plan if s not in intent.plan]
        return retract(render_request(other, lang, rng, split=split), step, lang, rng)
    dropped = switch_decoys(intent, intents)
    if not dropped:
        return text
    return switch(render_request(rng.choice(dropped), lang, rng, split=split), text, lang, rng)


def _colloquial(text: str, lang: str, rng: random.Random, prob: float) -> str:
    return colloquialize(text, lang, rng) if prob > 0 and rng.random() < prob else text


def heldout_clause_examples(n: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """A validation split in phrasings neither training nor the evaluation sets use.

    Every request is composed clause by clause (`compose_template`) from the held-out
    entry of each compositional pool (first clause, connector, follow-up clause), which
    training never shows (`_pool`) and the held-out evaluation split never composes (it
    uses the held-out whole-sentence templates only), for the plans that compose (21 of
    25). Training's validation split shares its phrasings (an SFT router scores ~1.0
    there), so only a split like this one can show forgetting when settings are chosen.
    """
    intents = [i for i in INTENTS if composable(i)]
    return generate_examples(
        n, seed=seed, split="heldout", intents=intents, compose_prob=1.0, styled_prob=0.0
    )


def _cycle(intents: Sequence[Intent], repeats: Mapping[str, int]) -> list[Intent]:
    """One cycle of the generator: each intent `repeats.get(name, 1)` times."""
    names = {i.name for i in intents}
    unknown = sorted(set(repeats) - names)
    if unknown:
        raise ValueError(f"intent_repeats names no intent: {unknown}; intents: {sorted(names)}")
    if any(k < 1 for k in repeats.values()):
        raise ValueError(f"intent_repeats must be at least 1 each: {dict(repeats)}")
    return [i for i in intents for _ in range(repeats.get(i.name, 1))]


class LeverProbs(TypedDict, total=False):
    """The lever rates `generate_examples` takes, which `demo_splits` passes through."""

    colloquial_prob: float | None
    wide_prob: float | None
    refusal_prob: float | None
    correction_prob: float | None
    prompt_prob: float | None
    busy_prob: float | None
    anime_prob: float | None
    anime_subject_prob: float | None
    context_prob: float | None
    spoken_prob: float | None
    foreign_prob: float | None
    dialect_prob: float | None
    fix_prob: float | None
    text_prob: float | None
    lettering_prob: float | None
    film_prob: float | None
    palette_prob: float | None
    long_prob: float | None
    decline_prob: float | None
    destination_prob: float | None
    twin_prob: float | None
    twin_kinds: Sequence[str]
    intent_repeats: Mapping[str, int] | None


def demo_splits(
    *,
    seed: int = 0,
    n_train: int = 3000,
    n_val: int = 300,
    n_heldout: int = 600,
    colloquial_langs: Sequence[str] = LANGS,
    **lever_probs: Unpack[LeverProbs],
) -> dict[str, list[dict[str, Any]]]:
    """Train and validation from the training phrasings, held-out from unseen phrasings.
    `lever_probs` are `generate_examples`' lever rates (`text_prob=`, `film_prob=`, ...,
    and `twin_kinds`), for the training phrasings only."""
    both = generate_examples(
        n_train + n_val, seed=seed, split="train", colloquial_langs=colloquial_langs, **lever_probs
    )
    return {
        "train": both[:n_train],
        "val": both[n_train:],
        "heldout": generate_examples(n_heldout, seed=seed + 1, split="heldout"),
    }
