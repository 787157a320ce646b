"""Words the creator wants drawn, shown, sung or spoken: a headline, a caption, lyrics.

Outside structured briefs, the generator's requests quoted words only as the line a
voiceover speaks (`SLOTS["line"]`), so a router trained on them read a quoted headline or
caption as speech: "a poster for the fair, big letters: 'OPEN ALL NIGHT'" became a
voiceover. Creators quote words for every medium: the headline on a poster (what a
text-to-image engine like Ideogram is chosen for), a label that must stay legible, a
clip's title card, a song's lyrics, a line in a storyboard panel, the caption a post will
carry. `with_rendered_text` adds such a clause, for one step of the request's plan, to
the end of the request; at `NEUTRAL_PROB`, and always for a grade (which changes no
words), the clause names the caption the result will be posted with instead. The words
come from one pool whatever the step, and a voiceover gets its own clauses ("narration:
'...'"), so only the framing around the quote tells which step it belongs to: without
speech clauses, the lever taught the router that a quote in a video request is a title
card, and narrated videos lost their voiceover. The plan does not change: the words are
what that step draws, shows, sings or speaks, never a step of their own.

A clause after the request leaves the requests whose point is the words (a sign that
reads them, a photo they are added to) unwritten, and a router trained without them read
such a request's quote as a voiceover: "a sign that reads 'stay weird'" became speech.
`with_lettering` swaps a request's subject for a thing that carries words
(`LETTERED_SUBJECTS`: "a vintage tin sign reading 'Last Call'"), or an edit's change for
adding or changing words (`LETTERED_EDITS`); the plan does not change.
"""

from __future__ import annotations

import random

from studio_align.simulate.router.levers import swap_first
from studio_align.simulate.router.phrases import (
    BOARD,
    EDIT,
    I2V,
    MUSIC,
    PRODUCT,
    SPEECH,
    T2I,
    T2V,
    V2V,
    Intent,
)
from studio_align.simulate.router.slots import SLOTS

# fmt: off
WORDS = {
    "en": ("GRAND OPENING", "Best Dad Ever", "Sunrise Yoga Club", "Only 3 Days Left", "Hello, Autumn",
           "The Quiet Hours", "Mango Street Tacos", "50% OFF", "See You In Spring", "Welcome Home, Lily",
           "Night Shift", "We Made It!", "Fresh Bread Daily", "Chapter Seven", "Lost & Found",
           "Keep It Simple", "Coming Soon", "Don't Panic", "Thank You, Teachers", "Small Town, Big Dreams",
           "Game Night", "the tide always comes back", "no rain, no flowers", "Ollie's Garage",
           "Brew & Bloom", "Last Call", "happy 5th birthday Noah", "made with love", "Class of 2027",
           "Save the Date"),
    "zh": ("盛大开业", "清仓特卖", "爸爸最棒", "秋天你好", "晚安，城市", "限时三天", "夏日新品", "欢迎回家",
           "一路顺风", "毕业快乐", "好好吃饭", "周末见", "早安打工人", "山海有归期", "慢生活", "小王修车铺",
           "春日限定", "今天也要加油", "谢谢老师", "不负韶华", "来都来了", "人间烟火", "第七章", "一起去看海",
           "猫咪咖啡馆", "福气满满", "热烈庆祝", "年年有余", "干杯", "我们结婚啦"),
}
QUOTES = {"en": (("'", "'"), ('"', '"'), ("“", "”")), "zh": (("“", "”"), ("「", "」"), ("《", "》"))}

# Per step of a plan: clauses that put the words on what that step makes. `None` is the
# clause any plan can take: the caption the result will be posted with.
CLAUSES: dict[str | None, dict[str, tuple[str, ...]]] = {
    T2I: {"en": ("with the words {q} in big letters", "the headline reads {q}", "text on it: {q}",
                 "title across the top: {q}", "lettering that says {q}", "put {q} on it in a bold font"),
          "zh": ("上面写着{q}", "大字写{q}", "标题是{q}", "配字{q}", "印上{q}几个字", "文字：{q}")},
    EDIT: {"en": ("and add the text {q} along the bottom", "also put {q} on it as a caption"),
           "zh": ("再在底部加一行字{q}", "顺便配上文字{q}")},
    PRODUCT: {"en": ("keep the label {q} readable", "the brand name {q} should face the camera"),
              "zh": ("包装上的{q}要清楚", "瓶身上的{q}字样别糊")},
    T2V: {"en": ("with the title {q} at the start", "end on the words {q}", "with {q} as the title card",
                 "subtitle at the end: {q}"),
          "zh": ("开头打出标题{q}", "结尾出字幕{q}", "片名叫{q}", "最后定格在{q}几个字上")},
    I2V: {"en": ("and make the text {q} on it glow", "keep the title {q} still while the rest moves"),
          "zh": ("图上的{q}几个字要闪一闪", "上面的标题{q}保持不动")},
    V2V: {"en": ("keep the on-screen title {q}",), "zh": ("片头的字幕{q}保留",)},
    MUSIC: {"en": ("lyrics: {q}", "the chorus goes {q}", "the hook is {q}", "sung words: {q}"),
            "zh": ("歌词是{q}", "副歌唱{q}", "歌词就一句：{q}", "要唱出{q}")},
    BOARD: {"en": ("in the last panel she says {q}", "panel two has the line {q} in a speech bubble"),
            "zh": ("最后一格他说{q}", "第二格配对白{q}")},
    SPEECH: {"en": ("the voiceover says {q}", "narration: {q}", "and a narrator who says {q}",
                    "and a voice reading {q}"),
             "zh": ("旁白说{q}", "配音念{q}", "解说：{q}", "再配一句旁白{q}")},
    None: {"en": ("it goes with the caption {q}", "the post will say {q}"),
           "zh": ("配文：{q}", "发的时候文案是{q}")},
}
# fmt: on
NEUTRAL_PROB = 0.2


def with_rendered_text(intent: Intent, text: str, lang: str, rng: random.Random) -> str:
    """`text` with a clause of quoted words for one step of `intent`'s plan (or, at
    `NEUTRAL_PROB`, the caption it will be posted with). One draw of `rng`."""
    rng = random.Random(rng.getrandbits(64))
    step: str | None = rng.choice(intent.plan)
    if step not in CLAUSES or rng.random() < NEUTRAL_PROB:
        step = None
    left, right = rng.choice(QUOTES[lang])
    clause = rng.choice(CLAUSES[step][lang]).replace("{q}", left + rng.choice(WORDS[lang]) + right)
    text = text.rstrip(" .。,，!！")
    if lang == "zh":
        return text + "，" + clause
    return text + rng.choice((", ", "; ", " - ")) + clause


# fmt: off
# things whose point is their words, swapped in for `SLOTS["subject"]` (a still or a clip
# made from words); `{q}` is filled with quoted `WORDS`
LETTERED_SUBJECTS: dict[str, tuple[str, ...]] = {
    "en": ("a café chalkboard that says {q}", "a vintage tin sign reading {q}",
           "a birthday cake with {q} piped in icing", "a T-shirt printed with {q}",
           "a coffee mug that reads {q}", "a protest placard saying {q}", "a graffiti wall spelling out {q}",
           "a bookmark with {q} in gold foil", "a canvas tote bag printed with {q}", "a road sign that reads {q}",
           "a doormat that says {q}", "the words {q} in chrome 80s letters", "the word {q} spelled in balloons"),
    "zh": ("写着{q}的小黑板", "一块复古铁皮牌，上面写着{q}", "奶油写着{q}的生日蛋糕", "印着{q}的白T恤",
           "印着{q}的马克杯", "喷着{q}的涂鸦墙", "烫金写着{q}的书签", "印着{q}的帆布袋", "写着{q}的路牌",
           "写着{q}的门垫", "用气球拼出的{q}", "毛笔字写的{q}"),
}
# changes that add or change words, swapped in for `SLOTS["edit"]` (an edit of an upload)
LETTERED_EDITS: dict[str, tuple[str, ...]] = {
    "en": ("add the words {q} across the top", "write {q} on the blank sign in the back",
           "put {q} in the corner in a handwritten font", "change the text on the shop front to {q}",
           "add a caption that says {q} under the subject", "stamp {q} diagonally over it"),
    "zh": ("在右上角加上{q}几个字", "把门头的字改成{q}", "左下角写一行{q}", "给它加上手写体的{q}",
           "在空白的地方印上{q}", "斜着盖一个{q}的章"),
}
# fmt: on


def with_lettering(text: str, lang: str, rng: random.Random) -> str:
    """`text` with its subject swapped for one of `LETTERED_SUBJECTS`, or where it has none,
    its edit for one of `LETTERED_EDITS`, the words quoted; unchanged where it has neither
    (typos, or a template without those slots). One draw of `rng`."""
    rng = random.Random(rng.getrandbits(64))
    swapped = swap_first(text, SLOTS["subject"], LETTERED_SUBJECTS, rng)
    if swapped == text:
        swapped = swap_first(text, SLOTS["edit"], LETTERED_EDITS, rng)
    left, right = rng.choice(QUOTES[lang])
    return swapped.replace("{q}", left + rng.choice(WORDS[lang]) + right)
