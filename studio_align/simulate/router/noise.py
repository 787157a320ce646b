"""Surface noise on a generated request: typos, word dropout, synonyms, clause order.

Each is a pure function of the text and the caller's random stream, so the generator
(`requests.py`) stays a deterministic function of its seed.
"""

from __future__ import annotations

import random
import re

from studio_align.simulate.router.phrases import SYNONYMS


def typo_en(text: str, rng: random.Random) -> str:
    """One typo in a word of four letters or more: adjacent letters swapped, one dropped,
    or one doubled."""
    words = text.split(" ")
    cands = [i for i, w in enumerate(words) if len(w) > 3 and w.isalpha()]
    if not cands:
        return text
    i = rng.choice(cands)
    w = words[i]
    j = rng.randrange(1, len(w) - 1)
    op = rng.randrange(3)
    if op == 0:
        w = w[:j] + w[j + 1] + w[j] + w[j + 2 :]
    elif op == 1:
        w = w[:j] + w[j + 1 :]
    else:
        w = w[:j] + w[j] + w[j:]
    words[i] = w
    return " ".join(words)


def drop_words(text: str, lang: str, rng: random.Random) -> str:
    """Delete one or two words (English) or characters (Chinese): word dropout, so the
    router learns from every cue in a request rather than from its whole shape."""
    for _ in range(rng.choice([1, 1, 2])):
        if lang == "en":
            words = text.split(" ")
            if len(words) < 5:
                break
            del words[rng.randrange(len(words))]
            text = " ".join(words)
        else:
            if len(text) < 8:
                break
            i = rng.randrange(len(text))
            text = text[:i] + text[i + 1 :]
    return text


def typo_zh(text: str, rng: random.Random) -> str:
    """One Chinese character dropped (texts with fewer than six are left alone)."""
    idx = [i for i, ch in enumerate(text) if "\u4e00" <= ch <= "\u9fff"]
    if len(idx) < 6:
        return text
    i = rng.choice(idx)
    return text[:i] + text[i + 1 :]


def synonyms(text: str, lang: str, rng: random.Random, prob: float) -> str:
    """Each word of `SYNONYMS` swapped, with probability `prob`, for one of its synonyms."""
    table = SYNONYMS[lang]
    if lang == "zh":
        for word, alts in table.items():
            if word in text and rng.random() < prob:
                text = text.replace(word, rng.choice(alts), 1)
        return text
    out = []
    for w in text.split(" "):
        core = w.strip(",.:;!?()'-").lower()
        if core in table and rng.random() < prob:
            w = w.replace(core, rng.choice(table[core]))
        out.append(w)
    return " ".join(out)


def shuffle_clauses(text: str, rng: random.Random) -> str:
    """The comma- or semicolon-separated clauses in a random order."""
    parts = [p.strip() for p in re.split(r"[,，;；]", text) if p.strip()]
    if len(parts) < 2:
        return text
    rng.shuffle(parts)
    sep = "，" if any("\u4e00" <= ch <= "\u9fff" for ch in text) else ", "
    return sep.join(parts)
