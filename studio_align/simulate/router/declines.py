"""Declines: requests that give a reason for leaving a medium out ("the clip got cut from the
budget, so only the picture"; "配乐客户自己有，这边只要画面").

The refusal lever (`refusals`) says "no music" and "不要视频". People also say why a
medium is not wanted, or name the medium they do want against the one they do not, and
both name the medium left out in a full clause, which a router trained on the short
refusals alone can read as one more ask. `add_decline(text, plan, attachments,
lang, rng)` puts one such sentence before the request (60 %) or after it, for a step the
plan lacks (`refusals.refusable`: music or a voice on a video, a video on a picture,
pictures on audio, new content on a grade). The plan (the label) is unchanged.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from studio_align.simulate.router.levers import attach_phrase
from studio_align.simulate.router.refusals import refusable

# what is declined -> language -> (suffixes, prefixes), as `refusals.PHRASES`; a suffix starts
# with its separator
PHRASES: dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "music": {
        "en": ((". the band is recording the music themselves, so don't add any",
                " - the score is being done elsewhere, keep it silent",
                ". we have a licensed track already, so skip the soundtrack"),
               ("the soundtrack is licensed separately, so leave the music out: ",
                "our composer is scoring this one herself, so no track from you. ",
                "we already bought a song for it, I only need the visuals: ",
                "music is the label's job on this, you do the picture side: ")),
        "zh": (("。音乐另外买了，不用配",
                "，配乐那边乐队自己录，这里别加音乐",
                "。歌已经选好了，音乐不用你做"),
               ("配乐我们自己有版权曲，音乐这块不用管：",
                "音乐已经找人在做了，这边只要画面：",
                "背景音乐客户会自己加，你先出画面：")),
    },
    "voice": {
        "en": ((". the narration is being recorded separately, so no voiceover",
                " - a voice actor is doing the lines later, keep it without speech"),
               ("the presenter records the voiceover herself, so no narration: ",
                "we'll add the voice in post, I only need the footage: ",
                "our narrator is booked for next week, so leave the voice out: ")),
        "zh": (("。配音另外约了人录，这里不用",
                "，人声后期自己加，别配旁白"),
               ("旁白我们自己录，不用配音：",
                "解说词后期另外找人配，这边只要画面：")),
    },
    "video": {
        "en": ((". the video can wait until next quarter, today it's just the image",
                " - a moving version would be overkill, the picture is enough",
                ". we dropped the clip from the plan, so keep it a still"),
               ("the animation got cut from this month's budget, so only a picture: ",
                "there's no time to make a clip before launch, one image will do: ",
                "forget the video part, we can't afford it yet. just the picture: ",
                "only a still this time, the motion version comes later: ")),
        "zh": (("。视频这次不做了，预算不够",
                "，做成视频太贵，静态的就行",
                "。动起来的版本下个月再说，这次只要图"),
               ("动画的预算没批下来，这次只出一张图：",
                "来不及做视频了，一张静态图就够：",
                "视频那部分先砍掉了，只要图片：",
                "这回就要图，视频以后再说：")),
    },
    "picture": {
        "en": ((". the picture side is done already, this is audio only",
                " - we don't need any visuals, the edit is finished"),
               ("the visuals are already finished, all I need is the audio: ",
                "no budget for images on this one, only the sound: ",
                "the video team has the footage covered, so just audio from you: ")),
        "zh": (("。画面已经剪好了，只缺声音",
                "，视觉部分别人在做，这边只要音频"),
               ("画面那边已经做好了，这次只要音频：",
                "图和视频都不用出，预算只够做声音：")),
    },
    "content": {
        "en": ((". nothing in the frame should change, the content is final",
                " - the shots are approved, so leave what's in them alone"),
               ("the edit is locked and signed off, so only the colours change: ",
                "the client approved every shot as it is, just the look of the colour: ")),
        "zh": (("。画面内容已经过审了，只改颜色",
                "，里面的东西一样都不能动，只调色调"),
               ("内容已经定稿，客户不让改画面，只动颜色：",
                "画面本身别改，甲方已经签字了，只调色：")),
    },
}  # fmt: skip


def add_decline(
    text: str, plan: Sequence[str], attachments: Sequence[str], lang: str, rng: random.Random
) -> str:
    """`text` with a sentence declining, with its reason, one step the plan lacks."""
    return attach_phrase(text, PHRASES, refusable(plan, attachments), lang, rng)
