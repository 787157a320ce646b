"""Corrections: requests whose writer changes their mind before sending ("a picture of a
fox, no wait, a short video of it"; "animate this, with music. actually scratch the music").

People type into a chat box the way they think, and the last thing said is what they
want. A sentence encoder that pools n-grams sees every step named in the message, and
templates never take anything back, so a router trained on them plans the step the writer
dropped. Two shapes, each with the label of what the writer settles on:

- **switch** (`switch`): a whole request for another plan with the same attachments, a
  correction marker, then the request itself;
- **retract** (`retract`): the request of a plan with one step more, then a sentence that
  drops that step.

`requests.generate_examples` renders the other plan's request with its own generator and
joins the two here, so this module holds only the phrases and the choice of plans.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from studio_align.simulate.router.phrases import GRADE, I2V, MUSIC, SPEECH, Intent

# language -> markers between the dropped request and the one the writer wants
SWITCH: dict[str, tuple[str, ...]] = {
    "en": (", no wait, ", ". actually, scratch that: ", " - sorry, I meant ", ". hmm no, ",
           ". on second thought, ", ". wait, change of plan: ", " -- no, forget that. ",
           "... actually no. ", ". ugh ignore that, "),
    "zh": ("……啊不对，", "，等下，不要这个了，", "。哦不，我是说", "，算了，还是", "。不对不对，",
           "，emmm还是", "。改一下需求：", "……等等，换一下，", "。刚才说错了，"),
}  # fmt: skip

# the step dropped -> language -> sentences that drop it (each starts with its separator)
RETRACT: dict[str, dict[str, tuple[str, ...]]] = {
    MUSIC: {
        "en": (". actually scratch the music", ", wait, no music after all",
               ". on second thought, skip the music", " - hmm, forget the music",
               ". actually no soundtrack, just that"),
        "zh": ("……等下，配乐不要了", "，算了，音乐不用了", "。哦不对，不要背景音乐了",
               "，BGM就算了", "。想了想，还是不加音乐"),
    },
    SPEECH: {
        "en": (". actually drop the voiceover", ", wait, no narration after all",
               ". on second thought, nobody talking", " - scratch the voice part"),
        "zh": ("，等下，旁白不要了", "。算了，不用配音了", "……哦不，解说就不要了", "，人声还是去掉吧"),
    },
    I2V: {
        "en": (". actually, don't animate it, the still is enough", ", wait, no need to make it move",
               ". on second thought, keep it still", " - scratch the video part"),
        "zh": ("，算了，不用动起来了", "……等下，视频不要了，图就行", "。想了想，静态的就好",
               "，不用做成视频了"),
    },
    GRADE: {
        "en": (". actually skip the colour grade", ", wait, no grading after all",
               ". on second thought, leave the colours as they are"),
        "zh": ("，调色就算了", "……等下，不用调色了", "。颜色还是保持原样吧"),
    },
}  # fmt: skip


def switch_decoys(intent: Intent, intents: Sequence[Intent]) -> list[Intent]:
    """Intents a writer could have asked for first: same attachments, another plan."""
    return [i for i in intents if i.attachments == intent.attachments and i.plan != intent.plan]


def retract_decoys(intent: Intent, intents: Sequence[Intent]) -> list[Intent]:
    """Intents whose plan is `intent.plan` with one droppable step more, same attachments."""
    out = []
    for other in intents:
        if other.attachments != intent.attachments or len(other.plan) != len(intent.plan) + 1:
            continue
        extra = [s for s in other.plan if s not in intent.plan]
        rest = [s for s in other.plan if s in intent.plan]
        if len(extra) == 1 and extra[0] in RETRACT and tuple(rest) == intent.plan:
            out.append(other)
    return out


def switch(dropped: str, text: str, lang: str, rng: random.Random) -> str:
    """`dropped` (a request for another plan), a correction marker, then `text`."""
    return dropped.rstrip("。.!！ ,，") + rng.choice(SWITCH[lang]) + text


def retract(fuller: str, step: str, lang: str, rng: random.Random) -> str:
    """`fuller` (a request that also asks for `step`), then a sentence dropping `step`."""
    return fuller.rstrip("。.!！ ,，") + rng.choice(RETRACT[step][lang])
