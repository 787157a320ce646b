"""Words from cinema used as a look: "cinematic lighting", "像电影里的一帧", "film-score feel".

Creators borrow the cinema's words for every medium. A still is "cinematic" or "a frame
from a 70s movie", an image prompt names a lens and film stock, a song should sound like
a film score, a voiceover like a trailer's narrator. The generator used such words mostly
where a video or a colour grade was asked for ("a cinematic shot of ...", "电影感调色"), so
a router trained on it read "cinematic film still of a detective" or "/imagine ...，电影感"
as a video. `with_film_words` adds one such phrase before or after a request, for a step
of its plan that makes something new: a still, a product shot, a video, an animation, a
storyboard (one pool for all of them, so the phrase seldom tells which; only a film's
frame or poster is for pictures and a film's scene for moving ones), music or speech
(pools of their own). Requests whose plan only changes an upload (an edit, a restyle, a
grade) are left as they are: there, "make it look like a film" is the request itself.
The plan does not change: the phrase is a look, never a step of its own.
"""

from __future__ import annotations

import random

from studio_align.simulate.router.phrases import (
    BOARD,
    I2V,
    MUSIC,
    PRODUCT,
    SPEECH,
    T2I,
    T2V,
    Intent,
)

Pool = dict[str, tuple[str, ...]]

# fmt: off
VISUAL: Pool = {
    "en": ("cinematic", "cinematic lighting", "anamorphic widescreen", "shot on 35mm film stock",
           "music-video aesthetic", "blockbuster scale", "the mood of an indie film", "arthouse cinema vibe",
           "film noir shadows", "letterboxed", "IMAX-level detail", "feels like a movie"),
    "zh": ("电影感", "电影质感", "宽银幕构图", "胶片电影味", "MV风", "大片既视感", "文艺片氛围", "好莱坞大片质感",
           "黑色电影的光影", "电影级光影"),
}
# a picture can be a frame or a poster of a film; only moving pictures are its scenes
STILL: Pool = {
    "en": ("like a frame from a 70s movie", "movie-poster energy", "epic like a movie still", "a film still look"),
    "zh": ("像电影里的一帧", "电影海报的感觉", "有剧照的感觉", "像电影截图"),
}
MOVING: Pool = {
    "en": ("like a scene out of a heist movie", "paced like a movie trailer", "like the opening shot of a film"),
    "zh": ("像港片里的一场戏", "节奏像电影预告", "像电影的开场镜头"),
}
SCORE: Pool = {
    "en": ("like a film score", "movie-soundtrack feel", "trailer-music energy", "cinematic strings",
           "the sound of an old film's credits"),
    "zh": ("电影配乐的感觉", "像电影原声", "预告片配乐那种张力", "电影感的弦乐", "像老电影片尾的音乐"),
}
VOICE: Pool = {
    "en": ("epic trailer narrator style", "like a film's opening narration", "a cinematic announcer voice",
           "delivered like a movie line"),
    "zh": ("电影预告片那种腔调", "像电影开场的独白", "大片旁白的感觉", "像电影台词那样念"),
}
# fmt: on


def _with(*pools: Pool) -> Pool:
    return {lang: tuple(p for pool in pools for p in pool[lang]) for lang in ("en", "zh")}


POOLS: dict[str, Pool] = {
    T2I: _with(VISUAL, STILL),
    PRODUCT: _with(VISUAL, STILL),
    T2V: _with(VISUAL, MOVING),
    I2V: _with(VISUAL, MOVING),
    BOARD: VISUAL,
    MUSIC: SCORE,
    SPEECH: VOICE,
}
BEFORE_PROB = 0.3


def with_film_words(intent: Intent, text: str, lang: str, rng: random.Random) -> str:
    """`text` with a phrase of cinema's words for a step of `intent`'s plan that makes
    something new, before it (at `BEFORE_PROB`) or after it; unchanged where no step does.
    One draw of `rng`."""
    rng = random.Random(rng.getrandbits(64))
    steps = [s for s in intent.plan if s in POOLS]
    if not steps:
        return text
    phrase = rng.choice(POOLS[rng.choice(steps)][lang])
    sep = "，" if lang == "zh" else ", "
    if rng.random() < BEFORE_PROB:
        return phrase[:1].upper() + phrase[1:] + sep + text
    return text.rstrip(" .。,，!！") + sep + phrase
