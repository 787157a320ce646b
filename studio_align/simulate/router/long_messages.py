"""Long messages: the request inside an email, a set of notes or a pasted story.

People paste what they already wrote to a colleague: a greeting, why they need it, what
else is going on, what is already taken care of, and the ask somewhere among it. The
templates never write more than a sentence or two, so a router trained on them reads every
medium a long message names as a step to add ("the agency already did the music" becomes
music). `with_long_context(text, plan, lang, rng)` wraps a request in such a message:

- three to seven sentences of background that name no medium (who it is for, the occasion,
  the deadline, the budget, unrelated news);
- with probability one half, one sentence saying that a medium the plan does *not* have
  is taken care of elsewhere ("the soundtrack is already licensed", "海报行政已经做好了");
- the ask first (30 %), last (50 %) or after the first sentences (20 %), as prose with an
  optional greeting and sign-off, or as bulleted notes with the ask as the action item.

The ask stays within the head or the tail that `router.format.truncate_ids` keeps in most
messages: the background is what gets cut. The plan (the label) is unchanged.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from studio_align.simulate.router.phrases import MUSIC, SPEECH
from studio_align.simulate.router.refusals import IMAGE_STEPS, VIDEO_STEPS

BACKGROUND: dict[str, tuple[str, ...]] = {
    "en": (
        "We're a small team of four and everyone is stretched thin this month.",
        "This is for the open day at the community garden on the 12th.",
        "The client signed off the budget yesterday, finally.",
        "Our last campaign did well with people in their twenties, so we're keeping that tone.",
        "My manager is back from leave on Monday and wants to see something by then.",
        "It's for a charity raffle, so it doesn't need to be perfect, just warm.",
        "We opened our second shop in October and business has been slow since.",
        "The board meeting got moved, so we suddenly have an extra week.",
        "Honestly I've tried three other tools and none of them got it right.",
        "My daughter is the one who usually helps me with this, but she's away at university.",
        "Sales asked for it after a customer complained our page looks dated.",
        "Everything has to be approved by the head office in Leeds, which takes ages.",
        "It's our tenth anniversary and we want to mark it without making a huge fuss.",
        "The event itself is in a converted warehouse with very high ceilings.",
        "We don't have a designer at the moment, the last one moved to Berlin.",
        "Last year's version got lots of comments, most of them nice.",
        "Our audience is mostly parents who scroll late at night.",
        "I run the place with my brother, and he has strong opinions about everything.",
        "The deadline is Thursday at noon, Sydney time.",
        "Please keep it tasteful, the founder will definitely look at it.",
        "We had a rough year, so the team wants something hopeful.",
        "Legal says we can't show the logo of the venue, just so you know.",
    ),
    "zh": (
        "我们团队只有四个人，这个月大家都忙得不可开交。",
        "这是给下个月社区开放日准备的。",
        "客户昨天终于把预算批下来了。",
        "上次的活动在年轻人里反响不错，所以这次风格延续一下。",
        "领导下周一休假回来，想在那之前看到东西。",
        "是给公益义卖用的，不用太完美，温暖一点就好。",
        "我们十月份开了第二家店，最近生意一直比较淡。",
        "董事会推迟了，所以突然多出来一周时间。",
        "说实话我已经试了好几个工具，效果都不太理想。",
        "平时都是我女儿帮我弄这些，她现在去外地上大学了。",
        "销售那边说有顾客反映我们的页面太老气了。",
        "所有东西都要总部审批，流程特别慢。",
        "今年是我们开店十周年，想纪念一下但不想搞得太隆重。",
        "活动场地是一个老厂房改造的，层高特别高。",
        "我们现在没有设计师，之前那位去外地发展了。",
        "去年那一版评论挺多的，大部分是好评。",
        "我们的用户主要是晚上刷手机的宝妈宝爸。",
        "店是我和我哥一起开的，他对什么都有意见。",
        "截止时间是周四中午。",
        "请尽量有品位一点，老板肯定会亲自看。",
        "今年大家都挺不容易的，想要一点积极向上的感觉。",
        "法务提醒不能出现场地方的标志，先说一声。",
    ),
}

# a medium the plan lacks, said to be taken care of elsewhere (the label stays the plan)
HANDLED: dict[str, dict[str, tuple[str, ...]]] = {
    "music": {
        "en": ("The music is already licensed, so that part is sorted.",
               "Our agency is doing the soundtrack separately.",
               "We'll add our own song on the platform later."),
        "zh": ("音乐我们已经买好版权了，这部分不用管。", "配乐由合作的工作室另外做。",
               "背景音乐我们发布的时候自己加。"),
    },
    "speech": {
        "en": ("Our presenter will speak over it live.", "The voice-over is being recorded by a colleague.",
               "No narration from your side, the host talks during the event."),
        "zh": ("现场有主持人讲解，不用配旁白。", "配音同事会自己录。", "解说词活动当天主持人念。"),
    },
    "picture": {
        "en": ("The poster and the flyers are already printed.", "Our designer made the key visual last week.",
               "We have all the photos we need already."),
        "zh": ("海报和传单已经印好了。", "主视觉上周设计师已经做完了。", "图片素材我们已经够用了。"),
    },
    "video": {
        "en": ("The video side is handled by the events team.", "We already have a promo clip from last year.",
               "Nobody needs a video this time, it's all going in print."),
        "zh": ("视频那边活动组会负责。", "宣传片去年已经拍过了。", "这次不做视频，都是印刷品。"),
    },
}  # fmt: skip

GREETINGS = {
    "en": ("Hi team,", "Hey Alex,", "Hello!", "Morning all,", "Dear studio,", "Hi there,"),
    "zh": ("各位好，", "王老师您好：", "你好！", "大家早上好，", "小陈：", "您好，"),
}
SIGNOFFS = {
    "en": ("Thanks so much, Jo", "Cheers!", "Many thanks,\nPriya", "Best, Marcus", "ta x"),
    "zh": ("辛苦了，谢谢！", "麻烦了～", "谢谢，小李", "先谢谢啦", "祝好！"),
}
ASK_LABELS = {
    "en": ("ACTION:", "What I need:", "Ask:", "Today's request:"),
    "zh": ("待办：", "需求：", "要做的：", "今天的需求："),
}


def _handled(plan: Sequence[str], lang: str, rng: random.Random) -> str | None:
    """A sentence saying a medium the plan lacks is taken care of, or None if it has all."""
    steps = set(plan)
    lacking = [m for m, has in (("music", MUSIC in steps), ("speech", SPEECH in steps),
                                ("picture", bool(steps & IMAGE_STEPS)),
                                ("video", bool(steps & VIDEO_STEPS))) if not has]  # fmt: skip
    if not lacking:
        return None
    return rng.choice(HANDLED[rng.choice(lacking)][lang])


def with_long_context(text: str, plan: Sequence[str], lang: str, rng: random.Random) -> str:
    """`text` inside a longer message (module docstring); the ask's words are unchanged."""
    lines = rng.sample(BACKGROUND[lang], rng.randint(3, 7))
    if rng.random() < 0.5 and (handled := _handled(plan, lang, rng)) is not None:
        lines.insert(rng.randint(0, len(lines)), handled)
    r = rng.random()
    at = 0 if r < 0.3 else len(lines) if r < 0.8 else rng.randint(1, min(2, len(lines)))
    zh = lang == "zh"
    if rng.random() < 0.3:  # notes: one bullet each, the ask as the action item
        lines.insert(at, f"{rng.choice(ASK_LABELS[lang])}{'' if zh else ' '}{text}")
        return "\n".join(f"- {line}" for line in lines)
    if text[-1:] not in ".。!！?？~～":
        text += "。" if zh else "."
    lines.insert(at, text)
    body = ("" if zh else " ").join(lines)
    if rng.random() < 0.5:
        body = f"{rng.choice(GREETINGS[lang])}\n{body}"
    if rng.random() < 0.5:
        body = f"{body}\n{rng.choice(SIGNOFFS[lang])}"
    return body
