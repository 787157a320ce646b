"""Colour correction asked for as a problem to fix, not as a look to apply.

The grade templates (`phrases.py`) all ask for a creative look ("give this photo a kodak
portra film look", "电影感调色"). Creators more often describe what is wrong with an
upload: a colour cast, flat or washed-out footage, skin that looks grey under office
lights, a white balance that is off ("去掉偏黄，肤色自然一点"). That is the same step,
`grading.film`, but its words are repair words, and without them a router reads "fix the
blue cast in this photo" as an edit. These templates write the grade intents that start
from an upload (a photo, a clip, a clip with music) as a problem and, sometimes, the look
wanted instead.
"""

from __future__ import annotations

import random

from studio_align.simulate.router.phrases import Intent

# fmt: off
PROBLEMS = {
    "en": ("yellow cast", "strong blue cast", "green tint from the office lights", "washed-out colours",
           "flat grey look", "sickly skin tones", "white balance", "cold, lifeless colours",
           "oversaturated reds", "muddy shadows"),
    "zh": ("偏黄", "偏蓝得厉害", "灯光下脸色发绿", "颜色发灰", "整体灰蒙蒙的", "肤色发青", "白平衡不对",
           "色调太冷", "红色过饱和", "暗部脏脏的"),
}
WANTED = {
    "en": ("natural colours", "warm, true skin tones", "a clean neutral look", "punchier contrast",
           "the colours it had in real life"),
    "zh": ("自然一点的颜色", "肤色真实温暖", "干净通透", "反差再大一些", "还原真实的颜色"),
}
MOODS = {"en": ("calm", "upbeat", "gentle"), "zh": ("舒缓的", "轻快的", "温柔的")}

FIX_TEMPLATES: dict[str, dict[str, tuple[str, ...]]] = {
    "grade_image": {
        "en": ("fix the {problem} in this picture", "can you correct the colours in this photo? {problem}, I want {wanted}",
               "the colours in this shot are off ({problem}); I want {wanted}",
               "colour-correct this photo: {problem}, should be {wanted}"),
        "zh": ("这张照片{problem}，帮我校正一下颜色", "照片颜色有问题：{problem}，想要{wanted}",
               "帮我把这张图的色彩修正一下，现在{problem}", "这张相片{problem}，调回{wanted}"),
    },
    "grade_video": {
        "en": ("fix the {problem} in my footage", "please colour-correct this clip ({problem})",
               "the video came out with {problem}; make it {wanted}",
               "colour correction for this clip: {problem} -> {wanted}"),
        "zh": ("这段视频{problem}，帮我校色", "素材颜色不对，{problem}，要{wanted}",
               "把这个视频的颜色修正一下，现在{problem}", "这段片子{problem}，调成{wanted}"),
    },
    "grade_video_with_music": {
        "en": ("correct the colours of this clip ({problem}) and add {mood} music",
               "fix the {problem} in this video, then put a {mood} track under it"),
        "zh": ("这段视频{problem}，校个色，再配{mood}音乐", "先把视频的颜色修正（{problem}），再加一段{mood}背景音乐"),
    },
}
# fmt: on


def render_fix(intent: Intent, lang: str, rng: random.Random) -> str | None:
    """A colour-correction request for `intent` in `lang`, or None for an intent that has
    none (it starts from no upload, or grades nothing). One draw of `rng` either way, so
    a placebo replaces the same rows."""
    rng = random.Random(rng.getrandbits(64))
    if intent.name not in FIX_TEMPLATES:
        return None
    text = rng.choice(FIX_TEMPLATES[intent.name][lang])
    for key, pool in (("problem", PROBLEMS), ("wanted", WANTED), ("mood", MOODS)):
        text = text.replace("{" + key + "}", rng.choice(pool[lang]))
    return text
