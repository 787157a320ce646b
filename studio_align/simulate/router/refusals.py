"""Refusals: requests that say which step they do *not* want ("no music, just the motion").

A sentence encoder that pools n-grams carries "music" whether or not "no" comes before
it, and templates never refuse a step, so a router trained on them adds the very step a
creator refused. `add_refusal(text, plan, lang, rng)` appends (or puts first) one or two
refusal phrases naming a step the plan does not have but a similar plan would:

- music or a voice-over, on a plan that makes a video (and music on a speech plan, a
  voice on a music plan);
- a video or an animation, on a plan that makes only images;
- pictures, on a plan that makes only audio;
- changing the content, on a grade alone ("don't restyle it, only the colours").

The plan (the label) is unchanged: refusing a step is what makes the label right.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from studio_align.simulate.router.phrases import (
    BOARD,
    EDIT,
    GRADE,
    I2V,
    MUSIC,
    PRODUCT,
    SPEECH,
    T2I,
    T2V,
    V2V,
)

VIDEO_STEPS = frozenset({T2V, I2V, V2V})
IMAGE_STEPS = frozenset({T2I, EDIT, PRODUCT, BOARD})

# what is refused -> language -> (suffixes, prefixes); a suffix starts with its separator
PHRASES: dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "music": {
        "en": ((", no music", ", no soundtrack please", ", without background music",
                ". skip the music", ", no bgm", ", don't add any music", " - no music, silent is fine",
                ", music not needed"),
               ("no music, ", "no soundtrack - ", "without music: ")),
        "zh": (("，不要背景音乐", "，不用配乐", "，不要BGM", "，别加音乐", "，不需要音乐", "，音乐就不用了"),
               ("不要音乐，", "不用配乐，", "不加BGM，")),
    },
    "voice": {
        "en": ((", no voiceover", ", no narration needed", ". skip the voiceover", ", without a narrator",
                ", nobody talking", ", don't add a voice", ", no vocals"),
               ("no narration, ", "no voiceover: ")),
        "zh": (("，不用配音", "，不需要旁白", "，不要解说", "，别加人声", "，不要人声", "，旁白就算了"),
               ("不要配音，", "不用旁白，")),
    },
    "video": {
        "en": ((", not a video", ", don't animate it", ", keep it a still image", ", no video needed",
                ", no animation", ". just the picture, nothing moving"),
               ("not a video, just ", "no animation, ", "don't make it move, ", "still image only: ")),
        "zh": (("，不用做成视频", "，不要动起来", "，静态图就行", "，不要视频", "，不用动"),
               ("不要视频，", "不用动，", "别做成视频，", "就要静态的，")),
    },
    "picture": {
        "en": ((", no visuals", ", no picture needed", ", audio only", ", no video"),
               ("not an image, ", "audio only: ")),
        "zh": (("，不要画面", "，只要音频", "，不用做视频"), ("不要图，", "只要声音，")),
    },
    "content": {
        "en": ((", don't change anything else", ", leave the content alone, only the colours",
                ", no other edits"),
               ("don't restyle it, ", "don't edit anything, ")),
        "zh": (("，别的不用改", "，内容别动，只调颜色"), ("别改画面，", "内容不用动，")),
    },
}  # fmt: skip


def refusable(plan: Sequence[str], attachments: Sequence[str]) -> list[str]:
    """What a request for `plan` could plausibly refuse (keys of `PHRASES`)."""
    steps = set(plan)
    video = bool(steps & VIDEO_STEPS) or (GRADE in steps and "video" in attachments)
    out = []
    if video and MUSIC not in steps:
        out.append("music")
    if video and SPEECH not in steps:
        out.append("voice")
    if steps == {SPEECH}:
        out.append("music")
    if steps == {MUSIC}:
        out.append("voice")
    if not video and steps & (IMAGE_STEPS | {GRADE}):
        out.append("video")
    if steps <= {MUSIC, SPEECH}:
        out.append("picture")
    if steps == {GRADE}:
        out.append("content")
    return out


def add_refusal(
    text: str, plan: Sequence[str], attachments: Sequence[str], lang: str, rng: random.Random
) -> str:
    """`text` with one refusal (two, a quarter of the time) of steps the plan lacks."""
    kinds = refusable(plan, attachments)
    if not kinds:
        return text
    rng.shuffle(kinds)
    for kind in kinds[: 2 if len(kinds) > 1 and rng.random() < 0.25 else 1]:
        suffixes, prefixes = PHRASES[kind][lang]
        if rng.random() < 0.7:
            text = text.rstrip("。.!！ ") + rng.choice(suffixes)
        else:
            head = rng.choice(prefixes)
            text = head + (text[:1].lower() + text[1:] if lang == "en" else text)
    return text
