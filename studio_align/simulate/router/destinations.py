"""Destinations: requests that say what the result is for, naming a medium they do not ask
for ("the thumbnail for a video I've already edited"; "给已经剪好的视频做封面").

Creators name where a result goes: a video's cover, a podcast's artwork, music for a vlog
that is cut already. The medium named there is one they have, not one they ask for, and
a router that reads media words as asks adds it as a step. `destination_or_twin(intent,
text, lang, rng, ...)` puts one such phrase before the request (60 %) or after it, for a
plan that makes only stills (a video's or a podcast's cover) or only audio (for a video
that is done). The plan (the label) is unchanged.

A router that learns "a medium named in such a phrase is not asked" can read an ask
backwards ("a still, then animate it into the video" becomes the still alone). Twins
counter that: `destination_or_twin` turns a `twin_prob` share of those requests into a
phrase of the same shape that asks for the medium ("the thumbnail first, then turn it into
the video"), labelled with the plan that makes it too (a still and its animation; a new
video under the audio). A destination with no such plan in the catalog (a podcast's cover)
stays a destination.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from studio_align.simulate.router.levers import TWIN_KINDS, attach_pools
from studio_align.simulate.router.phrases import GRADE, I2V, MUSIC, SPEECH, T2V, Intent
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


# what the result is for, asked as well -> language -> (suffixes, prefixes): the twins of
# `PHRASES`, whose plan makes the medium they name
TWINS: dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "still_for_video": {
        "en": ((" - it's the thumbnail, and then animate it into the video itself",
                ". it opens our video, which you make from it next",
                ", as the cover of a video - then bring it to life as that video"),
               ("the thumbnail first, then turn it into the video: ",
                "for the cover frame, and then make the video from that frame: ",
                "there's no video yet, so the still first and then animate it: ",
                "the opening still of my next video, which you'll also animate: ")),
        "zh": (("，先做视频封面，再把它做成视频", "。这张是片头定格，然后让它动起来做成视频", "，当封面，接着用它生成视频"),
               ("视频还没做，先出封面再把它做成视频：", "先做封面，再让封面动起来成视频：",
                "做完片头静帧再接着做成动态视频：")),
    },
    "audio_for_video": {
        "en": ((" - the video doesn't exist yet, make it too", ". it's for a clip you should also make",
                ", to go under a vlog that you'll generate as well"),
               ("for a video that isn't made yet, make both: ", "this goes under a montage you'll also create: ",
                "make the video and the sound for it: ")),
        "zh": (("，视频还没做，也一起生成", "。是给短片用的，短片也请一起做", "，配在一段vlog里，vlog也帮我生成"),
               ("视频还没有，连视频一起做：", "配在一段新视频里，视频也要生成：", "画面和声音都要，先做视频：")),
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


def twin(intent: Intent, kind: str, intents: Sequence[Intent]) -> Intent | None:
    """The intent that also makes the medium `kind` names: `intent`'s plan with the
    still's animation after it, or a new video before the audio; same attachments."""
    if kind == "still_for_video":
        plan = (*intent.plan, I2V)
    elif kind == "audio_for_video":
        plan = (T2V, *intent.plan)
    else:
        return None
    return next(
        (i for i in intents if i.plan == plan and i.attachments == intent.attachments), None
    )


def destination_or_twin(
    intent: Intent,
    text: str,
    lang: str,
    rng: random.Random,
    *,
    intents: Sequence[Intent],
    twin_prob: float,
    twin_rng: random.Random,
    twin_kinds: Sequence[str] = TWIN_KINDS,
) -> tuple[Intent, str]:
    """`text` with a phrase naming what it is for, a medium `intent`'s plan does not make;
    or, for a kind in `twin_kinds`, a `twin_prob` share of the time (drawn from `twin_rng`)
    where a plan that makes that medium too exists, its twin asking for it, with that
    plan's intent."""
    kinds = destinations(intent.plan, intent.attachments)
    if not kinds:
        return intent, text
    kind = rng.choice(kinds)
    fuller = twin(intent, kind, intents) if twin_prob > 0 and kind in twin_kinds else None
    if fuller is not None and twin_rng.random() < twin_prob:
        return fuller, attach_pools(text, TWINS[kind][lang], lang, rng)
    return intent, attach_pools(text, PHRASES[kind][lang], lang, rng)
