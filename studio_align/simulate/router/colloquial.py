"""Colloquial rewriting: the demo generator's third voice, how people really type to a tool.

Templates and styled requests (`phrases`, `styles`) are written the way a
careful writer phrases a request. People typing into a chat box do not: Chinese users
swap the neutral verbs for colloquial ones (生成/制作/做 -> 整/搞/弄/来), drop the
measure word's 一 (画一张 -> 画张), end with particles (呗/吧/啊/哈/～), ask rather than
order (能不能...啊？), write homophone typos (视频 -> 视屏, 再 -> 在), and run clauses
together with spaces or no punctuation at all; English users write `u`, `pls`, `w/`,
`vid`, drop articles and punctuation, and wrap the request in "can u ... ?" or
"i wanna ...". `colloquialize(text, lang, rng)` applies a random subset of these
rewrites to an already rendered request. No rewrite removes a step's cue (at most it is
abbreviated or misspelt the way people do: `vid`, 视屏), so the label stays right.

Designed from general knowledge of chat-style writing, not from any evaluation or
validation request. Applied to training data only (`demo.generate_examples`,
`colloquial_prob`), from its own random stream so the rest of the data is unchanged.
"""

from __future__ import annotations

import random
import re

# fmt: off
# Neutral verb / measure-word phrases -> colloquial ones (substring rewrites, longest first).
ZH_REWRITES: dict[str, tuple[str, ...]] = {
    "生成一张": ("整张", "来张", "搞张", "弄张", "出张"),
    "生成一段": ("整段", "来段", "搞段", "弄个", "整个"),
    "做一张": ("整张", "搞张", "弄张", "来张", "做张"),
    "做一个": ("整个", "搞个", "弄个", "来个", "做个"),
    "画一张": ("画张", "画个", "整张", "来张"),
    "来一张": ("来张", "整张", "搞张"),
    "来一段": ("来段", "整段", "搞段"),
    "来一首": ("来首", "整首", "搞首"),
    "处理一下": ("弄一下", "搞一下", "整一下", "处理下"),
    "修一下": ("修修", "弄一下", "P一下", "修下"),
    "生成": ("整", "搞", "弄", "出"),
    "制作": ("整", "搞", "弄", "做"),
    "做个": ("整个", "搞个", "弄个", "来个"),
    "做成": ("弄成", "搞成", "整成"),
    "配上": ("配个", "加个", "整个", "来点"),
    "加上": ("加个", "加点", "整点", "来点"),
    "帮我": ("给我", "你帮我", "帮忙", "麻烦帮我", "能帮我"),
    "请": ("麻烦", "劳驾", ""),
    "想要": ("想整", "要", "想搞"),
    "背景音乐": ("bgm", "BGM", "背景乐"),
    "然后": ("然后呢", "完了", "之后"),
}
ZH_OPENERS = ("那个，", "嗯，", "诶，", "在不在，", "亲，", "老师，", "急急急，", "有个事，", "求求了，",
              "我想", "想让你", "帮我", "给我", "你好，我想", "哈喽，")
ZH_ENDINGS = ("呗", "吧", "啊", "呀", "哈", "哦", "嘛", "～", "~", "！！", "。", "…", "呗～", "吧，谢谢",
              "就行", "就好", "，谢了", "，多谢", "，辛苦啦", "，在线等", "，急", "，拜托了", "哈哈", "。。")
ZH_QUESTIONS = ("能不能{t}啊？", "可以{t}吗", "{t}，可以吗？", "{t}行不行", "有没有办法{t}", "能{t}不", "{t}？")
# Homophone and near-miss typos that Chinese input methods produce.
ZH_TYPOS: dict[str, tuple[str, ...]] = {
    "视频": ("视屏", "视品"), "再": ("在",), "的": ("得", "地"), "做": ("作",), "图片": ("图骗", "图篇"),
    "一下": ("一哈", "以下"), "像": ("象",), "张": ("帐",), "音乐": ("音月",), "吗": ("嘛", "麻"),
    "照片": ("找片", "照骗"), "风格": ("风各",), "已经": ("以经",),
}
# Words Chinese users type in English (or pinyin initials) mid-sentence.
ZH_SWITCH: dict[str, tuple[str, ...]] = {
    "海报": ("poster",), "头像": ("avatar", "头像pic"), "滤镜": ("filter",), "视频": ("video", "vid"),
    "音乐": ("music",), "图片": ("pic", "图pic"), "修图": ("P图", "ps一下"), "分镜": ("storyboard",),
    "动起来": ("animate一下", "动起来move"), "配乐": ("bgm",), "照片": ("photo",),
}

EN_WORDS: dict[str, tuple[str, ...]] = {
    "you": ("u", "ya"), "your": ("ur",), "please": ("pls", "plz"), "with": ("w/", "w"),
    "and": ("&", "n", "+"), "video": ("vid",), "videos": ("vids",), "picture": ("pic",),
    "photo": ("pic",), "something": ("smth", "sth"), "because": ("cuz", "bc"),
    "thanks": ("thx", "ty"), "really": ("rly",), "little": ("lil",), "about": ("abt",),
    "background": ("bg",), "people": ("ppl",), "for": ("4",), "to": ("2",), "are": ("r",),
    "music": ("musik", "muzic"), "image": ("img", "pic"), "okay": ("ok", "k"),
}
EN_PHRASES: dict[str, tuple[str, ...]] = {
    "want to": ("wanna",), "going to": ("gonna",), "give me": ("gimme",), "let me": ("lemme",),
    "i would like": ("i'd like", "id like"), "right now": ("rn",), "i need": ("need", "ineed"),
}
EN_OPENERS = ("yo ", "ok so ", "hey so ", "umm ", "so basically ", "pls ", "quick one - ", "hiii ", "hey ",
              "ok ", "lol ", "alright ")
EN_ENDINGS = (" pls", " plz", " thx", " lol", " :)", " !!", " asap", " ty", " tysm", " rn", " k thx", "?", "...",
              " haha", " thank u", " (if u can)")
EN_QUESTIONS = ("can u {t}?", "could you {t} pls", "is it possible to {t}?", "any way to {t}?", "i wanna {t}",
                "can i get u to {t}", "help me {t}", "u able to {t}?")
# Verbs a request may start with, so "can u {t}" stays grammatical.
EN_VERBS = ("make", "draw", "generate", "create", "turn", "animate", "edit", "remove", "give", "add", "put",
            "color", "colour", "grade", "restyle", "compose", "write", "read", "record", "narrate", "paint",
            "render", "shoot", "fix", "take", "convert", "transform", "apply", "sketch", "storyboard", "score",
            "film", "illustrate", "bring", "erase", "tone", "voice", "lay", "film", "retouch")
# fmt: on

_CJK = re.compile(r"[\u4e00-\u9fff]")
# A request that already opens with a greeting or a polite ask gets no opener or question
# wrap ("能不能你好，..." is nobody's writing).
ZH_OPENED = (
    "你好",
    "在吗",
    "急",
    "麻烦",
    "请",
    "帮",
    "给我",
    "求",
    "能不能",
    "可以",
    "想",
    "我想",
    "哈喽",
)
EN_OPENED = (
    "hey",
    "hi",
    "hello",
    "yo",
    "please",
    "pls",
    "could",
    "can",
    "quick",
    "need",
    "i'd",
    "looking",
    "request",
    "help",
    "ok",
    "so ",
)


def _rewrite_zh(text: str, rng: random.Random, prob: float) -> str:
    for word in sorted(ZH_REWRITES, key=len, reverse=True):
        if word in text and rng.random() < prob:
            text = text.replace(word, rng.choice(ZH_REWRITES[word]), 1)
    return text


def _swap_one(text: str, table: dict[str, tuple[str, ...]], rng: random.Random) -> str:
    """Replace one occurrence of one of `table`'s words present in `text` by a variant."""
    words = [w for w in table if w in text]
    if words:
        w = rng.choice(words)
        text = text.replace(w, rng.choice(table[w]), 1)
    return text


def _typo_zh(text: str, rng: random.Random) -> str:
    return _swap_one(text, ZH_TYPOS, rng)


def _switch_zh(text: str, rng: random.Random) -> str:
    return _swap_one(text, ZH_SWITCH, rng)


def _fragment_zh(text: str, rng: random.Random) -> str:
    """Punctuation as people type it: spaces, nothing, or a run-on of commas."""
    sep = rng.choice([" ", "", "，", ","])
    text = re.sub(r"[，,；;：:]\s*", sep, text)
    return text.rstrip("。！!～~")


def _zh(text: str, rng: random.Random) -> str:
    text = _rewrite_zh(text, rng, prob=0.6)
    if rng.random() < 0.25:
        text = _switch_zh(text, rng)
    if rng.random() < 0.3:
        text = _fragment_zh(text, rng)
    shape = rng.random()
    core = text.rstrip("。！!～~，,")
    opened = text.startswith(ZH_OPENED)
    if shape < 0.25 and len(core) < 30 and not opened:
        text = rng.choice(ZH_QUESTIONS).replace("{t}", core)
    elif shape < 0.75:
        text = core + rng.choice(ZH_ENDINGS)
    if rng.random() < 0.25 and not text.startswith(ZH_OPENED):
        text = rng.choice(ZH_OPENERS) + text
    if rng.random() < 0.25:
        text = _typo_zh(text, rng)
    return text


def _sub_words(
    text: str, table: dict[str, tuple[str, ...]], rng: random.Random, prob: float
) -> str:
    out = []
    for w in text.split(" "):
        core = w.strip(",.:;!?()'-").lower()
        if core in table and rng.random() < prob:
            w = w.lower().replace(core, rng.choice(table[core]), 1)
        out.append(w)
    return " ".join(out)


def _en(text: str, rng: random.Random) -> str:
    for phrase, alts in EN_PHRASES.items():
        if phrase in text.lower() and rng.random() < 0.7:
            text = re.sub(re.escape(phrase), rng.choice(alts), text, count=1, flags=re.IGNORECASE)
    text = _sub_words(text, EN_WORDS, rng, prob=0.5)
    if rng.random() < 0.3:  # terse: no articles
        text = re.sub(r"\b(a|an|the)\s+", "", text, flags=re.IGNORECASE)
    if rng.random() < 0.3:  # no punctuation between clauses
        text = re.sub(r"\s*[,;:]\s*", rng.choice([" ", " - ", " / "]), text)
    text = text.lower().rstrip(".!")
    shape = rng.random()
    first = text.split(" ", 1)[0]
    if shape < 0.3 and first in EN_VERBS:
        text = rng.choice(EN_QUESTIONS).replace("{t}", text)
    elif shape < 0.7:
        text = text + rng.choice(EN_ENDINGS)
    if rng.random() < 0.2 and not text.startswith(EN_OPENED):
        text = rng.choice(EN_OPENERS) + text
    return text


def colloquialize(text: str, lang: str, rng: random.Random) -> str:
    """`text` rewritten as a chat-box request (see module docstring); `lang` is the
    request's language. Chinese rewrites apply only where the text has Chinese in it."""
    if lang == "zh" and _CJK.search(text):
        return _zh(text, rng)
    if lang == "en":
        return _en(text, rng)
    return text
