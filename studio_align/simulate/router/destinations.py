"""Destinations: requests that say what the result is for, naming a medium they do not ask
for ("the thumbnail for a video I've already edited"; "给已经剪好的视频做封面").

Creators name where a result goes: a video's cover, a podcast's artwork, music for a vlog
that is cut already. The medium named there is one they have, not one they ask for, and
a router that reads media words as asks adds it as a step. `add_destination(text, plan,
attachments, lang, rng)` puts one such phrase before the request (60 %) or after it, for a
plan that makes only stills (a video's or a podcast's cover) or only audio (for a video
that is done). The plan (the label) is unchanged.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from studio_align.simulate.router.levers import attach_phrase
from studio_align.simulate.router.phrases import GRADE, MUSIC, SPEECH
from studio_align.simulate.router.refusals import IMAGE_STEPS

# what the result is for -> language -> (suffixes, prefixes), as `refusals.PHRASES`
PHRASES: dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "still_for_video": {
        "en": ((" - it's the thumbnail for a video I've already edited",
                ". it goes on the end screen of our finished video",
                ", to sit as the cover of my video on the channel page"),
               ("this is the thumbnail for my next upload, the video itself is done: ",
                "for the cover frame of a video we already cut: ",
                "for the end slate of our promo video: ",
                "it's the still that opens my channel's videos: ")),
        "zh": (("，用作视频封面，视频本身已经做好了", "。这是放在片尾的静帧", "，当我频道视频的封面"),
               ("给已经剪好的视频做封面：", "放在宣传片最后的定格：", "我新上传视频的封面用：")),
    },
    "still_for_audio": {
        "en": ((" - it's the cover for our podcast", ". it's the artwork for an album that's already recorded",
                ", for the sleeve of our new single"),
               ("cover art for a podcast episode: ", "artwork for my mixtape: ",
                "for the sleeve of a record we just finished: ")),
        "zh": (("，是给播客用的封面", "。这是已经录好的专辑的封面", "，做新单曲的封面"),
               ("播客单集的封面：", "新单曲的封面：", "电台节目的头图：")),
    },
    "audio_for_video": {
        "en": ((" - the video is already edited, it just needs this", ". it's for a clip I've finished cutting",
                ", to go under my vlog, which is done"),
               ("for a video that's already edited: ", "this goes under the montage I've cut: ",
                "for my finished travel vlog: ")),
        "zh": (("，视频我已经剪好了，只差这个", "。是给已经做好的短片用的", "，用在剪完的vlog里"),
               ("视频已经剪完了，给它用：", "配在我拍好的旅行视频里：", "给剪好的混剪用：")),
    },
}  # fmt: skip


def destinations(plan: Sequence[str], attachments: Sequence[str]) -> list[str]:
    """The kinds of `PHRASES` that fit `plan`: what a result of that plan could be for."""
    steps = set(plan)
    still = steps <= IMAGE_STEPS | {GRADE} and (GRADE not in steps or "image" in attachments)
    if still:
        return ["still_for_video", "still_for_audio"]
    if steps <= {MUSIC, SPEECH}:
        return ["audio_for_video"]
    return []


def add_destination(
    text: str, plan: Sequence[str], attachments: Sequence[str], lang: str, rng: random.Random
) -> str:
    """`text` with a phrase naming what it is for: a medium the plan does not make."""
    return attach_phrase(text, PHRASES, destinations(plan, attachments), lang, rng)
