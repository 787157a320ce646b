"""The data levers: their default rates with the measured effect behind each, their own
random streams, and their text edits on a rendered request.

Each lever (`requests.generate_examples`: wide lexicon, prompt style, busy subjects, anime
styles and subjects, spoken lines, context lines, corrections, colloquial, refusals,
declines, destinations, other languages, Cantonese and pinyin, colour correction, words to
render, words as the subject, cinema as a look, palettes) draws from its own stream, so turning one on or changing its rate leaves the
generator's other draws as they were: the measured effect of a lever is its own, not that
of a resampled training set. A swap (`swap_first`) draws its word only where the text has one
to replace, so a lever that rewrites a request earlier in the chain also moves the later
swaps' picks. The rates are training defaults; `requests.generate_examples` takes each
as a keyword, and held-out data uses none of them.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Literal

from studio_align.simulate.router.slots import CONTEXT_LINES

Split = Literal["train", "heldout"]

# Fraction of training requests written by `styles` (0 = templates only). 0.4 against 0 on
# validation (hand-written + generator, 300 SFT steps): 0.850 vs 0.781 exact; no other
# value was tried.
STYLED_PROB = 0.4
STYLED_TYPO_PROB = 0.15
# How many times a named intent comes up in each training cycle through the intents (every
# other intent once): the share of the training data each plan gets. Cycling through the
# intents evenly gives a still from words 3.7 % of the data and a video from words 8 % (two
# intents make one), where a still is the request creators write most (19 % of the
# hand-written validation rows, 2.5 times the text-to-video ones). None: stills twice a
# cycle (quickstart SFT, seeds 153-156) moved the 912 validation rows by +0.0 points:
# stills +3.1, videos from words -2.4, the long set in eight styles -10.9
# (docs/experiments/router-still-share.md).
INTENT_REPEATS: Mapping[str, int] = {}
# Fraction of training requests rewritten as chat-box text (`colloquial`), drawn
# from a separate random stream so the rest of the training data is unchanged. Off: 0.3
# against 0 (quickstart SFT, seeds 0 and 1) scored 0.858 vs 0.861 exact on the 176
# hand-written validation requests (handwritten_val + handwritten_val2), Chinese-only
# 0.3 scored 0.839 (docs/experiments/router-colloquial-kto-and-forgetting-levers.md). On the
# fine-tuned pretrained encoder, 0.3 scored 0.913 vs 0.904 on the 368 hand-written
# validation requests (3 seeds), under the +1.0 point the rule asked for
# (docs/experiments/router-encoder-lr-colloquial-corrections.md).
COLLOQUIAL_PROB = 0.0
# Fraction of training requests replaced by a styled request from the wider lexicon
# (`lexicon_wide`: artefact, technique and use names), drawn from its own random
# stream like the colloquial lever. 0.25: the pooled 272 hand-written validation
# requests with the fine-tuned pretrained encoder, seeds 0 and 1, 0.934 / 0.926 -> 0.941 /
# 0.949, no validation set lower (docs/experiments/router-wide-lexicon-on-the-encoder.md).
WIDE_PROB = 0.25
# Fraction of training requests that also refuse a step the plan lacks (`refusals`:
# "no music", "不用配音", "not a video, just ..."), drawn from its own random stream.
# 0.15: hand-written validation (272, 2 seeds) 0.895 -> 0.899 with a frozen encoder and
# 0.897 (seed 0) -> 0.928 with a fine-tuned one; its 16 negation rows: 6-7 right -> 16
# (docs/experiments/router-refusals-and-encoder-fine-tuning.md)
REFUSAL_PROB = 0.15
# Fraction of training requests whose writer changes their mind first (`corrections`: "a
# picture, no wait, a video of it"; "... with music. actually scratch the music"), drawn
# from its own random stream. Off: at 0.1 and at 0.05 it gains 2-5 points on the
# validation set with corrections and costs 1.3-3.1 on others (3 seeds each;
# docs/experiments/router-corrections-lower-share.md).
CORRECTION_PROB = 0.0
# Fraction of training requests replaced by a prompt-style request (`prompt_style`: tag
# prompts with Midjourney or Stable Diffusion syntax, JSON / key-value / markdown briefs),
# drawn from its own random stream. Measured effect of 0.05 (quickstart SFT, seeds 0-2):
# +5.2 points exact on the validation set in those styles (handwritten_val5), +0.1 on the
# other four pooled (docs/experiments/router-prompt-style-lower-share.md).
PROMPT_PROB = 0.05
# Fraction of training requests whose subject is swapped for a busy one
# (`slots.BUSY_SUBJECTS`: a jazz trio, a cinema marquee, a train pulling in), drawn from its
# own random stream. Off: 0.5 against 0 (quickstart SFT, seeds 0-2) scored 0.897 vs 0.902
# exact on the 432 hand-written validation requests, -2.1 on handwritten_val3
# (docs/experiments/router-busy-subjects.md).
BUSY_PROB = 0.0
# Fraction of training requests whose style word (`SLOTS["style"]`) is swapped for one of
# `slots.ANIME_STYLES` ("anime", "manga", 二次元), drawn from its own random stream: a still
# or a clip in an anime style is still a still or a clip, and "anime" stops meaning
# storyboard. 5.6 % of requests carry a style word, so 0.3 touches about 1.7 %. Measured
# effect (quickstart SFT, seeds 6-13): handwritten_val6, stills in anime and film styles,
# 0.628 -> 0.847 exact; the five earlier validation sets pooled 0.908 -> 0.908
# (docs/experiments/router-anime-style-words.md).
ANIME_PROB = 0.3
# Fraction of training requests whose subject (`SLOTS["subject"]`, 28 % of requests: stills
# and clips made from words) is swapped for one drawn the anime way (`slots.ANIME_SUBJECTS`:
# "an anime girl with twin tails", 二次元少女), drawn from its own random stream; 0.1 touches
# about 3 % of requests. Measured effect (quickstart SFT, seeds 96-103, against the data
# without it): the 36 validation rows with an anime-family word that ask for no storyboard
# 0.816 -> 0.948 exact, the 40 storyboard rows +0.9, the ten sets pooled +0.7
# (docs/experiments/router-anime-subjects.md).
ANIME_SUBJECT_PROB = 0.1
# Fraction of training requests with a line around them that names no medium
# (`slots.CONTEXT_LINES`: a hand-off, a deadline, a client's words), drawn from its own
# random stream. Off until measured (docs/experiments/router-context-lines.md).
CONTEXT_PROB = 0.0
# Fraction of training requests whose spoken line (`SLOTS["line"]`, four plain lines a
# language) is swapped for one of `slots.SPOKEN_LINES` (lines that name pictures, films,
# music or scenes), drawn from its own random stream: what a voiceover says does not choose
# the plan. 6.8 % of requests carry a line, so 0.5 touches about 3.4 %. Measured effect
# (quickstart SFT, seeds 26-29): the 47 validation requests with a voiceover 0.691 ->
# 0.878 exact, the 520 pooled 0.874 -> 0.893 (docs/experiments/router-spoken-lines.md).
SPOKEN_PROB = 0.5
# Fraction of training requests replaced by one written in Spanish, French, German, Japanese
# or Korean (`foreign`), drawn from its own random stream. Measured effect of 0.05 against a
# placebo that writes the same rows in English (quickstart SFT, seeds 40-43):
# handwritten_val8, eight other languages, 0.875 -> 0.922 exact; the seven other validation
# sets pooled +0.6 points, none lower by more than 0.6; no gain on the three languages the
# lever does not write. The evaluation sets (paired seeds 44-46): v1 -2.0, v2 +0.7, v3 -1.0,
# v4 -2.4 points (docs/experiments/router-foreign-languages.md).
FOREIGN_PROB = 0.05
# Fraction of training requests replaced by one in Cantonese or in pinyin (`dialects`),
# drawn from its own random stream, after `foreign`. Off: against a placebo that writes the
# same rows in Mandarin (quickstart SFT), 0.05 gave the validation sets' 11 Cantonese and
# pinyin rows +27.3 points and cost handwritten_val7 3.1; 0.025 gave them +13.6 and cost
# handwritten_val4 2.3, each on every seed (docs/experiments/router-dialects.md).
DIALECT_PROB = 0.0
# Fraction of the grade requests that start from an upload (a photo, a clip, a clip with
# music) rewritten as a colour problem to fix (`color_fix`), from its own stream. Off:
# against a placebo that rewrites the same rows as ordinary grade requests (quickstart SFT,
# eight seeds), 0.3 gave the validation sets' 85 grade rows +2.4 points and the nine sets
# pooled +0.7, none lower by more than 0.5, under the 3-point gain its study asked for
# (docs/experiments/router-colour-correction.md). Paired with `PALETTE_PROB` 0.2, see
# there.
FIX_PROB = 0.0
# Fraction of training requests given a clause of quoted words for one step of their plan
# to draw, show, sing or speak (`rendered_text`: a poster's headline, a label, a title card,
# lyrics, a caption, a voiceover's line), from its own stream. Measured effect against the
# data without it (quickstart SFT, seeds 72-79): handwritten_val10, requests with words to
# render (written by the lever's author), 0.635 -> 0.848 exact; the nine other validation
# sets pooled +0.6 points, none lower by more than 1.2 (handwritten_val7, another author's,
# +5.2); their 62 voiceover rows -0.4. Without speech clauses the lever
# cost those rows 3.2 points (docs/experiments/router-rendered-text.md).
TEXT_PROB = 0.1
# Fraction of training requests whose subject (a still or a clip made from words) or, in an
# edit, whose change is swapped for one whose point is words to render
# (`rendered_text.with_lettering`: "a vintage tin sign reading 'Last Call'", "add the words
# 'Game Night' across the top"), from its own stream. Off: at 0.2 against the data without
# it (quickstart SFT, seeds 149-151), handwritten_val10 (requests with words to render)
# +2.1 points (per-seed sd 9.4), under the 4.0 its study asked for; every other validation
# row +0.2, none lower by more than 3.0 on every seed; its videos with a title -16.7
# (docs/experiments/router-lettering.md).
LETTERING_PROB = 0.0
# Fraction of training requests given a phrase of cinema's words as a look for a step of
# their plan that makes something new (`film_words`: "cinematic lighting" on a still, "like
# a film score" on music), from its own stream. Measured effect against the data without it
# (quickstart SFT, seeds 80-87): the validation sets' 150 rows that make a still and no
# video +1.8 points (per-seed sd 5.6), their 109 text-to-video rows +0.7, 87 grade rows
# +0.1, the ten sets pooled +0.4, none lower by more than 1.0
# (docs/experiments/router-film-words.md).
FILM_PROB = 0.1
# Fraction of training requests that make a still, a clip or a storyboard from words given
# the palette wanted (`palette`: "colours: navy and gold", "莫兰迪色系"), from its own
# stream. Off: at 0.2 against the data without it (quickstart SFT, seeds 88-95), the
# validation sets' 319 rows that make a picture from words +1.5 points and the ten sets
# pooled +0.4, but their 87 grade rows -2.4, past the 2.0 its study allowed: grades asked
# only in colour words ("fix the blue cast") became edits (docs/experiments/router-palette.md).
# Paired with `FIX_PROB` 0.3 (seeds 104-111) the grade rows held (+0.3), but the picture
# rows gained 0.1 (docs/experiments/router-palette-with-colour-fix.md).
PALETTE_PROB = 0.0
# Fraction of training requests put inside a long message (`long_messages`: an email, notes
# or a story around the ask, sometimes saying a medium the plan lacks is handled
# elsewhere), from its own stream. Off until measured
# (docs/experiments/router-long-messages.md).
LONG_PROB = 0.0
# Fraction of training requests that also decline, with a reason, a step the plan lacks
# (`declines`: "the clip got cut from the budget, so only a picture"), and fraction that say
# what the result is for, naming a medium the plan does not make (`destinations`: "the
# thumbnail for a video I've already edited"), each from its own stream. Declines off:
# alone at 0.1 (quickstart SFT, seeds 140-142), handwritten_val14 (requests that name a
# medium they do not ask for) +19.8 points, but the validation rows whose plan has two or
# more steps -1.6, every other row -0.9 and handwritten_val10 -3.6 on every seed
# (docs/experiments/router-declines-alone.md); with destinations, the multi-step rows fell
# 2.6-3.1 (docs/experiments/router-mentions.md, router-mentions-lower-rate.md).
DECLINE_PROB = 0.0
# Destinations at 0.3 alone cost the multi-step rows 1.5 points (seeds 143-145): a router
# taught "a medium named in such a phrase is not asked" read asks backwards ("a still, then
# animate it" became the still). `TWIN_PROB` of the destination requests of the kinds in
# `TWIN_KINDS` become their twin, which asks for the medium named, labelled with the plan
# that makes it too (`destinations.TWINS`), from its own stream. Measured effect of 0.3,
# 0.5 and the stills' twins against the data without destinations (quickstart SFT, seeds
# 146-148): handwritten_val14 0.589 -> 0.703 (+6.2 to +15.6 by seed), the multi-step rows
# +0.4, every other validation row +0.7, none of the fourteen sets lower by more than 2.1
# (docs/experiments/router-still-twins.md). On the quickstart's seeds 0-2, SFT:
# handwritten_val14 0.557 -> 0.714, but handwritten_val10 (quoted words to render)
# 0.844 -> 0.771 on every seed and handwritten_v4 0.861 -> 0.806; the served router's
# abstention on the held-out split 5.5 % -> 1.1 %. The audio twins (a new video under the sound)
# are left out: with them handwritten_val10 fell 4.7 on every seed, titled videos gaining
# a voice (docs/experiments/router-destination-twins.md).
DESTINATION_PROB = 0.3
TWIN_PROB = 0.5
TWIN_KINDS: tuple[str, ...] = ("still_for_video",)


def lever(
    prob: float | None, default: float, name: str, seed: int, split: Split
) -> tuple[float, random.Random]:
    """A lever's rate (`default` in training where not given, 0 otherwise) and its own
    random stream."""
    if prob is None:
        prob = default if split == "train" else 0.0
    return prob, random.Random(f"{name}:{seed}:{split}")


def with_context(text: str, lang: str, rng: random.Random) -> str:
    """`text` with a line of `CONTEXT_LINES` before it (60 %) or after it."""
    line = rng.choice(CONTEXT_LINES[lang])
    zh = lang == "zh"
    if rng.random() < 0.6:
        if line[-1] in ":：.。!！”'":
            return line + ("" if zh else " ") + text
        return line + ("，" if zh else ": ") + text
    end = "" if text[-1:] in (".", "。", "!", "！", "?", "？") else ("。" if zh else ".")
    return text + end + ("" if zh else " ") + line.rstrip(":：")


def attach_phrase(
    text: str,
    phrases: Mapping[str, Mapping[str, tuple[Sequence[str], Sequence[str]]]],
    kinds: Sequence[str],
    lang: str,
    rng: random.Random,
) -> str:
    """`text` with a phrase of one of `kinds` (`phrases`: kind -> language -> (suffixes,
    prefixes)) before it (60 %; an English text's first letter then lower-cased) or after it
    (a suffix starts with its separator); unchanged where no kind fits."""
    if not kinds:
        return text
    return attach_pools(text, phrases[rng.choice(kinds)][lang], lang, rng)


def attach_pools(
    text: str, pools: tuple[Sequence[str], Sequence[str]], lang: str, rng: random.Random
) -> str:
    """`text` with one of `pools` (suffixes, prefixes) before it (60 %; an English text's
    first letter then lower-cased) or after it."""
    suffixes, prefixes = pools
    if rng.random() < 0.6:
        head = rng.choice(prefixes)
        return head + (text[:1].lower() + text[1:] if lang == "en" else text)
    return text.rstrip("。.!！ ") + rng.choice(suffixes)


def swap_first(
    text: str,
    pools: dict[str, tuple[str, ...]],
    new: dict[str, tuple[str, ...]],
    rng: random.Random,
) -> str:
    """`text` with its first word from `pools` replaced by one of `new` in that word's
    language (unchanged where typos or a template left none of them in it)."""
    for lang, pool in pools.items():
        for word in pool:
            if word in text:
                return text.replace(word, rng.choice(new[lang]), 1)
    return text
