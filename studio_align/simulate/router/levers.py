"""The data levers' own random streams and their text edits on a rendered request.

Each lever (`requests.generate_examples`: wide lexicon, prompt style, busy subjects, anime
styles, spoken lines, context lines, corrections, colloquial, refusals, other languages,
Cantonese and pinyin, colour correction, words to render, cinema as a look, palettes)
draws from its own stream, so turning one on or changing its rate leaves the generator's
other draws as they were: the measured effect of a lever is its own, not that of a
resampled training set. A swap (`swap_first`) draws its word only where the text has one
to replace, so a lever that rewrites a request earlier in the chain also moves the later
swaps' picks.
"""

from __future__ import annotations

import random
from typing import Literal

from studio_align.simulate.router.slots import CONTEXT_LINES

Split = Literal["train", "heldout"]


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
