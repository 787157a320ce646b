"""Prompt-style requests: how creators type to a generation tool rather than to a person.

`render_prompt(intent, lang, rng)` writes the request in one of two shapes:

- *tag prompts*, the way image-model prompts are written: the subject, then comma-separated
  quality, lens and light tags, sometimes with Midjourney parameters (`--ar 16:9`),
  Stable Diffusion weights (`(best quality:1.2)`) or a `prompt: ... negative: ...` pair.
  A bare tag prompt asks for an image (what an image tool makes of it); a video prompt
  carries a camera move or a duration, music its genre and tempo, speech the line to say,
  a storyboard its panels, and a step on an attached file names what to do with it. Only
  one-step plans are written this way.
- *briefs*: JSON, `key: value` lines or a markdown list naming the deliverables in order
  (`"output": ["poster", "10s animation of it"]`) and the one detail each needs.

Pure function of `rng`, training data only (like `styles`), from slot pools of its own plus
`slots.SLOTS`.
"""

from __future__ import annotations

import json
import random

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
    Intent,
)
from studio_align.simulate.router.slots import SLOTS

# fmt: off
IMAGE_TAGS = {
    "en": ("highly detailed", "sharp focus", "soft lighting", "golden hour", "35mm", "85mm portrait lens",
           "depth of field", "studio lighting", "volumetric light", "octane render", "trending on artstation",
           "matte painting", "ultra realistic", "8k", "4k uhd", "concept art", "pastel colors", "rim light",
           "wide angle", "film grain", "masterpiece", "best quality", "intricate", "moody lighting",
           "isometric", "flat vector", "watercolor", "oil painting", "unreal engine", "photorealistic"),
    "zh": ("高清", "细节丰富", "柔光", "黄金时刻", "景深", "电影感", "超写实", "8k", "4K", "概念艺术", "马卡龙色",
           "逆光", "广角", "胶片颗粒", "杰作", "最佳画质", "精致", "氛围感", "等距视角", "扁平插画", "水彩",
           "油画质感", "虚幻引擎", "摄影级", "国风", "赛博朋克", "唯美"),
}
VIDEO_CUES = {
    "en": ("drone shot", "slow motion", "timelapse", "tracking shot", "camera pans left", "dolly zoom",
           "handheld camera", "24fps", "{dur} clip", "{dur} video", "seamless loop video", "camera orbits around",
           "cinematic b-roll"),
    "zh": ("航拍", "慢动作", "延时摄影", "跟拍镜头", "镜头左摇", "推镜头", "手持镜头", "{dur}视频", "{dur}短片",
           "循环视频", "环绕运镜", "空镜头"),
}
MJ_PARAMS = ("--ar 16:9", "--ar 9:16", "--ar 3:2", "--ar 1:1", "--v 6", "--v 5.2", "--stylize 300", "--q 2",
             "--style raw", "--chaos 20", "--niji 6")
VIDEO_PARAMS = ("--motion 5", "--duration 5", "--fps 24", "--camera zoom in", "--seed 42")
NEGATIVES = {
    "en": ("blurry", "lowres", "watermark", "bad hands", "extra fingers", "text", "jpeg artifacts"),
    "zh": ("模糊", "低分辨率", "水印", "畸形手指", "文字", "噪点"),
}
GENRES = {
    "en": ("lofi hip hop", "synthwave", "acoustic folk", "orchestral", "ambient", "house", "jazz trio",
           "piano solo", "trap beat", "city pop", "post-rock"),
    "zh": ("lofi", "古风", "民谣", "管弦乐", "氛围音乐", "电子舞曲", "爵士", "钢琴独奏", "说唱伴奏", "城市流行"),
}
MUSIC_TAGS = {
    "en": ("{n} bpm", "instrumental", "no vocals", "{m} min", "loopable", "warm analog synths",
           "vinyl crackle", "strings", "soft drums", "female vocals"),
    "zh": ("{n} bpm", "纯音乐", "无人声", "{m}分钟", "可循环", "弦乐", "鼓点轻一点", "女声哼唱"),
}
PANELS = {"en": ("{k} panels", "{k}-panel", "{k} frames"), "zh": ("{k}格", "{k}个镜头", "{k}张分镜")}
STEP_NOUNS: dict[str, dict[str, tuple[str, ...]]] = {
    T2I: {"en": ("image", "poster", "illustration", "key visual", "cover art", "wallpaper"),
          "zh": ("图片", "海报", "插画", "主视觉", "封面", "壁纸")},
    EDIT: {"en": ("photo edit", "retouch", "inpainting"), "zh": ("修图", "精修", "局部重绘")},
    T2V: {"en": ("video", "short clip", "{dur} video"), "zh": ("视频", "短片", "{dur}视频")},
    I2V: {"en": ("animation of the image", "image-to-video", "animated version", "{dur} animation of it"),
          "zh": ("图生视频", "让图片动起来", "动态版", "{dur}动画")},
    V2V: {"en": ("video restyle", "video-to-video"), "zh": ("视频转绘", "视频风格化")},
    MUSIC: {"en": ("music", "background music", "soundtrack", "bgm"), "zh": ("配乐", "背景音乐", "音乐", "bgm")},
    SPEECH: {"en": ("voiceover", "narration", "tts"), "zh": ("配音", "旁白", "语音播报")},
    BOARD: {"en": ("anime storyboard", "storyboard panels"), "zh": ("日漫分镜", "分镜")},
    PRODUCT: {"en": ("product shot", "white-background packshot", "listing photo"),
              "zh": ("白底主图", "商品图", "电商主图")},
    GRADE: {"en": ("colour grade", "film look grading", "color correction"), "zh": ("调色", "胶片调色", "色调调整")},
}
DETAIL_SLOT = {T2I: "subject", EDIT: "edit", T2V: "subject", I2V: "motion", V2V: "vrestyle", MUSIC: "mood",
               SPEECH: "line", BOARD: "story", PRODUCT: "bg", GRADE: "look"}
KEYS: dict[str, dict[str, tuple[str, ...]]] = {
    "en": {"type": ("type", "output", "deliverable", "task", "format"),
           "detail": ("subject", "prompt", "details", "content", "notes")},
    "zh": {"type": ("类型", "产出", "需求", "任务", "交付"), "detail": ("内容", "描述", "提示词", "主题", "备注")},
}
ATTACHED_LEAD: dict[str, dict[str, tuple[str, ...]]] = {  # one-step plans on an attached file, tag-prompt shape: "<lead>, <detail>"
    I2V: {"en": ("i2v", "img2vid", "image to video", "animate"), "zh": ("图生视频", "图转视频", "动起来")},
    EDIT: {"en": ("inpaint", "edit", "retouch"), "zh": ("修图", "局部重绘", "P图")},
    V2V: {"en": ("v2v", "vid2vid", "restyle"), "zh": ("视频转绘", "视频风格化")},
    GRADE: {"en": ("color grade", "grade", "lut"), "zh": ("调色", "调个色")},
    PRODUCT: {"en": ("packshot", "product photo", "ecommerce shot"), "zh": ("白底图", "商品主图", "电商图")},
}
# fmt: on


def _slot(name: str, lang: str, rng: random.Random) -> str:
    return rng.choice(SLOTS[name][lang])


def _fill(text: str, lang: str, rng: random.Random) -> str:
    return text.format(
        dur=_slot("dur", lang, rng), n=rng.randrange(70, 141, 5), m=rng.choice((1, 2, 3)),
        k=rng.choice((4, 6, 8)),
    )  # fmt: skip


def _tags(pool: dict[str, tuple[str, ...]], lang: str, rng: random.Random, k: int) -> list[str]:
    return [_fill(t, lang, rng) for t in rng.sample(pool[lang], k)]


def _join(parts: list[str], lang: str) -> str:
    return ("，" if lang == "zh" else ", ").join(parts)


def _image_prompt(lang: str, rng: random.Random) -> str:
    tags = _tags(IMAGE_TAGS, lang, rng, rng.randint(2, 5))
    subject = _slot("subject", lang, rng)
    form = rng.random()
    if form < 0.25:  # Stable Diffusion: weighted tags first, sometimes a negative prompt
        tags = [f"({t}:{rng.choice((1.1, 1.2, 1.3))})" if rng.random() < 0.4 else t for t in tags]
        text = _join([*tags, subject], lang)
        if rng.random() < 0.5:
            neg = _join(rng.sample(NEGATIVES[lang], 2), lang)
            text = (f"提示词：{text}。反向提示词：{neg}" if lang == "zh"
                    else f"prompt: {text}. negative prompt: {neg}")  # fmt: skip
        return text
    text = _join([subject, *tags], lang)
    if form < 0.7:  # Midjourney parameters
        text += " " + " ".join(rng.sample(MJ_PARAMS, rng.randint(1, 3)))
        if rng.random() < 0.4:
            text = "/imagine prompt: " + text
    return text


def _video_prompt(lang: str, rng: random.Random) -> str:
    parts = [_slot("subject", lang, rng), *_tags(VIDEO_CUES, lang, rng, rng.randint(1, 2))]
    parts += _tags(IMAGE_TAGS, lang, rng, rng.randint(0, 2))
    rng.shuffle(parts)
    text = _join(parts, lang)
    if rng.random() < 0.4:
        text += " " + " ".join(rng.sample(VIDEO_PARAMS, rng.randint(1, 2)))
    return text


def _tag_prompt(step: str, lang: str, rng: random.Random) -> str:
    """A one-step plan's request as a tag prompt."""
    if step == T2I:
        return _image_prompt(lang, rng)
    if step == T2V:
        return _video_prompt(lang, rng)
    if step == MUSIC:
        parts = [_slot("mood", lang, rng), rng.choice(GENRES[lang])]
        return _join([*parts, *_tags(MUSIC_TAGS, lang, rng, rng.randint(1, 3))], lang)
    if step == SPEECH:
        head = rng.choice(STEP_NOUNS[SPEECH][lang])
        line, voice = _slot("line", lang, rng), _slot("voice", lang, rng)
        return f"{head}（{voice}）：{line}" if lang == "zh" else f'{head}, {voice}: "{line}"'
    if step == BOARD:
        parts = [rng.choice(STEP_NOUNS[BOARD][lang]), _fill(rng.choice(PANELS[lang]), lang, rng)]
        return _join([*parts, _slot("story", lang, rng)], lang)
    lead = rng.choice(ATTACHED_LEAD[step][lang])
    return (f"{lead}：" if lang == "zh" else f"{lead}: ") + _slot(DETAIL_SLOT[step], lang, rng)


def _brief(intent: Intent, lang: str, rng: random.Random) -> str:
    """The plan's deliverables, in order, and the first step's detail, as a structured brief."""
    nouns = [_fill(rng.choice(STEP_NOUNS[s][lang]), lang, rng) for s in intent.plan]
    then = " → " if rng.random() < 0.5 else (" 然后 " if lang == "zh" else " then ")
    k_type, k_detail = (rng.choice(KEYS[lang][k]) for k in ("type", "detail"))
    detail = _slot(DETAIL_SLOT[intent.plan[0]], lang, rng)
    form = rng.random()
    if form < 0.35:
        out: str | list[str] = nouns if len(nouns) > 1 and rng.random() < 0.6 else then.join(nouns)
        return json.dumps({k_type: out, k_detail: detail}, ensure_ascii=False)
    if form < 0.7:
        sep = "：" if lang == "zh" else ": "
        return f"{k_type}{sep}{then.join(nouns)}\n{k_detail}{sep}{detail}"
    head = rng.choice(
        ("## 需求", "需求：", "【需求】") if lang == "zh" else ("## Brief", "Brief:", "**Request**")
    )
    lines = [f"- {k_type}: {then.join(nouns)}", f"- {k_detail}: {detail}"]
    return "\n".join([head, *lines])


def render_prompt(intent: Intent, lang: str, rng: random.Random) -> str:
    """One prompt-style request for `intent` (a tag prompt for a one-step plan half the
    time, else a brief)."""
    if len(intent.plan) == 1 and rng.random() < 0.5:
        return _tag_prompt(intent.plan[0], lang, rng)
    return _brief(intent, lang, rng)
