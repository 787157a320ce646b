"""Colours asked for as part of what is made: "navy and gold", "莫兰迪色系", "整体偏暖".

A creator who wants a new picture or clip names its colours as often as its subject: a
poster "in red and black", a wallpaper "in lilac and peach", a clip "整体偏冷". The
generator named colours mostly where a grade was asked for ("teal and orange", "青橙色调"),
so a router trained on it added a grade to a poster whose brief said "Colours: navy and
gold". `with_palette` adds a palette after a request whose plan makes a still, a clip or a
storyboard from words; plans with a grade, an edit or a restyle are left as they are,
since there a colour is what that step does. The plan does not change: the palette is how
the new picture looks, never a grade of its own.
"""

from __future__ import annotations

import random

from studio_align.simulate.router.phrases import BOARD, EDIT, GRADE, T2I, T2V, V2V, Intent

# fmt: off
COLOURS = {
    "en": ("burgundy and cream", "lilac and peach", "mint and white", "black with one red accent",
           "mustard and teal", "soft beige and sage", "neon green on black", "shades of blue only",
           "coral and navy", "muted earth tones", "candy pastels", "silver and ice blue"),
    "zh": ("莫兰迪色系", "粉紫色系", "蓝白配色", "红黑配色", "暖黄色调", "低饱和度", "糖果色", "大地色系", "墨绿加金",
           "黑白加一点红", "整体偏冷", "整体偏暖", "奶油色系"),
}
FRAMES = {
    "en": ("in {c}", "colours: {c}", "palette of {c}", "colour scheme {c}", "everything in {c}"),
    "zh": ("{c}", "配色：{c}", "颜色用{c}", "整体{c}"),
}
# fmt: on
# an animation or a product shot starts from an upload, whose colours a palette would change
MAKES = (T2I, T2V, BOARD)
CHANGES = (EDIT, V2V, GRADE)


def with_palette(intent: Intent, text: str, lang: str, rng: random.Random) -> str:
    """`text` with a palette after it, where `intent` makes a picture or a video and
    changes no upload; unchanged otherwise. One draw of `rng`."""
    rng = random.Random(rng.getrandbits(64))
    if not any(s in MAKES for s in intent.plan) or any(s in CHANGES for s in intent.plan):
        return text
    colours = rng.choice(COLOURS[lang])
    frame = rng.choice(FRAMES[lang])
    if colours.startswith("整体"):  # already says what it covers
        frame = "{c}"
    sep = "，" if lang == "zh" else rng.choice((", ", "; ", ". "))
    return text.rstrip(" .。,，!！") + sep + frame.replace("{c}", colours)
