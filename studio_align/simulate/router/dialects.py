"""Chinese as the main templates do not write it: Cantonese, and Mandarin typed in pinyin.

The main Chinese templates (`phrases.py`) are written Mandarin in simplified characters.
Creators also write colloquial Cantonese in traditional characters (幫我整段片, 呢張相,
郁吓), and some type Mandarin as toneless pinyin when no input method is at hand ("bang wo
hua yi zhang tu"). The encoder reads both, but fine-tuning never shows it which of their
words choose a plan. These templates give every demo intent one or two phrasings in each,
filled from small pools written the same way.
"""

from __future__ import annotations

import random

from studio_align.simulate.router.foreign import render_in
from studio_align.simulate.router.phrases import Intent

DIALECTS = ("yue", "pinyin")

# fmt: off
DIALECT_SLOTS: dict[str, dict[str, tuple[str, ...]]] = {
    "yue": {
        "style": ("水彩", "動漫", "港漫", "油畫"),
        "subject": ("一隻喺窗邊瞓覺嘅貓", "維港夜景", "茶餐廳入面嘅奶茶", "兩個細路喺公園踢波"),
        "edit": ("刪走後面啲途人", "將個天換做日落", "執走件衫上面個logo"),
        "motion": ("啲樹葉隨風郁", "水慢慢流", "鏡頭慢慢推埋去"),
        "mood": ("輕鬆", "熱血", "溫馨"),
        "line": ("多謝光臨，歡迎再嚟", "新口味限時推出", "歡迎收睇我哋嘅頻道"),
        "product": ("手錶", "香水", "手袋"),
        "look": ("暖啲復古啲", "冷色低飽和", "好似舊菲林咁"),
        "story": ("一個學煮飯嘅機械人", "一個細路女揸住氣球飛上天", "兩個朋友喺山頂迷路"),
        "vrestyle": ("港漫風", "油畫咁", "動漫風"),
    },
    "pinyin": {
        "style": ("shui cai", "dong man", "you hua", "guo feng"),
        "subject": ("xue shan xia de xiao mu wu", "yu ye de cheng shi jie dao", "yi zhi zai hai bian pao de gou",
                    "fang jian li kan shu de nv hai"),
        "edit": ("qu diao bei jing li de lu ren", "ba tian kong huan cheng wan xia", "qu diao you xia jiao de shui yin"),
        "motion": ("shu ye sui feng yao", "hu mian you bo wen", "jing tou man man tui jin"),
        "mood": ("shu huan", "re xue", "wen nuan"),
        "line": ("huan ying guang lin", "xin pin shang shi, xian shi you hui", "gan xie da jia de zhi chi"),
        "product": ("shou biao", "xiang shui", "bei bao"),
        "look": ("nuan se fu gu", "leng se di bao he", "lao dian ying de se diao"),
        "story": ("yi ge xue zuo fan de ji qi ren", "yi ge zhua zhe qi qiu fei shang tian de xiao nv hai",
                  "liang ge zai sen lin li mi lu de peng you"),
        "vrestyle": ("man hua feng", "you hua feng", "shui mo feng"),
    },
}

DIALECT_TEMPLATES: dict[str, dict[str, tuple[str, ...]]] = {
    "text_to_image": {
        "yue": ("幫我畫張{subject}嘅圖", "整張{style}風嘅{subject}畀我"),
        "pinyin": ("sheng cheng yi zhang tu: {subject}", "hua yi fu {subject}, {style} feng ge"),
    },
    "edit_image": {
        "yue": ("呢張相幫我{edit}", "改吓呢張圖，{edit}唔該"),
        "pinyin": ("zhe zhang zhao pian bang wo {edit}", "xiu yi xia zhe zhang tu: {edit}"),
    },
    "text_to_video": {
        "yue": ("幫我整段{subject}嘅片", "想要條短片，拍{subject}，{style}風"),
        "pinyin": ("zuo ge shi pin, nei rong shi {subject}", "sheng cheng yi ge {subject} de duan shi pin"),
    },
    "image_to_video": {
        "yue": ("將呢張相整成片，{motion}", "呢張圖可唔可以郁吓，{motion}"),
        "pinyin": ("ba zhe zhang tu zuo cheng shi pin, {motion}", "rang zhe zhang zhao pian dong qi lai, {motion}"),
    },
    "video_to_video": {
        "yue": ("將呢段片轉做{vrestyle}", "呢條片幫我改成{vrestyle}"),
        "pinyin": ("ba zhe duan shi pin gai cheng {vrestyle}", "zhe ge shi pin zhuan cheng {vrestyle}"),
    },
    "music": {
        "yue": ("幫我作首{mood}啲嘅歌，配片用", "整段{mood}嘅背景音樂，一分鐘左右"),
        "pinyin": ("lai yi shou {mood} de ge, pei shi pin yong", "xie yi duan {mood} de chun yin yue, yi fen zhong"),
    },
    "speech": {
        "yue": ("幫我讀出嚟：「{line}」", "錄段旁白，講「{line}」"),
        "pinyin": ("bang wo nian yi xia: {line}", "pei yin, nei rong shi: {line}"),
    },
    "storyboard": {
        "yue": ("畫套動漫分鏡，講{story}", "幫我出{story}嘅分鏡"),
        "pinyin": ("hua yi zu dong man fen jing, jiang {story}", "bang wo chu {story} de fen jing"),
    },
    "product_shot": {
        "yue": ("幫我將呢個{product}影到好似網店白底相咁", "呢個{product}整張靚啲嘅產品相"),
        "pinyin": ("ba zhe ge {product} zuo cheng shang pin zhan shi tu", "gei zhe ge {product} pai yi zhang dian shang zhu tu"),
    },
    "grade_image": {
        "yue": ("呢張相調色，要{look}", "幫我將張相調到{look}"),
        "pinyin": ("zhe zhang zhao pian tiao se, {look}", "bang wo ba zhe zhang tu tiao cheng {look}"),
    },
    "grade_video": {
        "yue": ("呢段片幫我調色，{look}", "條片嘅色調改到{look}"),
        "pinyin": ("zhe duan shi pin bang wo tiao se, {look}", "shi pin tiao cheng {look} de se diao"),
    },
    "song_video": {
        "yue": ("幫呢首歌整個MV，拍{subject}", "配合呢首歌整段片，有{subject}"),
        "pinyin": ("gei zhe shou ge zuo yi ge MV, {subject}", "gen zhe shou ge pei yi duan shi pin, {subject}"),
    },
    "image_then_video": {
        "yue": ("先畫張{subject}嘅圖，再整成片",),
        "pinyin": ("xian hua yi zhang {subject} de tu, zai zuo cheng shi pin",),
    },
    "animate_with_music": {
        "yue": ("將呢張相郁起嚟，再配埋{mood}嘅音樂",),
        "pinyin": ("rang zhe zhang zhao pian dong qi lai, zai pei dian {mood} de yin yue",),
    },
    "video_with_music": {
        "yue": ("整段{subject}嘅片，配埋{mood}嘅音樂",),
        "pinyin": ("sheng cheng {subject} de shi pin, pei shang {mood} de yin yue",),
    },
    "video_with_voiceover": {
        "yue": ("整段{subject}嘅片，加段旁白講「{line}」",),
        "pinyin": ("sheng cheng {subject} de shi pin, zai jia pang bai: {line}",),
    },
    "edit_then_animate": {
        "yue": ("呢張相先{edit}，然後整成片",),
        "pinyin": ("zhe zhang tu xian {edit}, zai zuo cheng dong tai shi pin",),
    },
    "storyboard_then_animate": {
        "yue": ("畫{story}嘅分鏡，畫完整成動畫",),
        "pinyin": ("hua {story} de fen jing, zai zuo cheng dong hua",),
    },
    "product_promo": {
        "yue": ("呢個{product}先整張產品相，再剪段宣傳片",),
        "pinyin": ("zhe ge {product} xian zuo shang pin tu, zai zuo yi duan xuan chuan shi pin",),
    },
    "restyle_with_music": {
        "yue": ("呢段片轉做{vrestyle}，再加{mood}嘅音樂",),
        "pinyin": ("zhe duan shi pin gai cheng {vrestyle}, zai jia {mood} de yin yue",),
    },
    "image_with_grade": {
        "yue": ("畫張{subject}嘅圖，再調到{look}",),
        "pinyin": ("sheng cheng {subject} de tu, zai tiao cheng {look}",),
    },
    "animate_with_grade": {
        "yue": ("將呢張相整成片，之後調色要{look}",),
        "pinyin": ("ba zhe zhang zhao pian zuo cheng shi pin, zai tiao se, {look}",),
    },
    "grade_video_with_music": {
        "yue": ("呢段片調色{look}，再配埋{mood}嘅音樂",),
        "pinyin": ("zhe duan shi pin tiao se {look}, zai pei {mood} de yin yue",),
    },
    "image_video_music": {
        "yue": ("畫張{subject}嘅圖，郁起嚟，再加{mood}嘅背景音樂",),
        "pinyin": ("xian sheng cheng {subject} de tu, zai zuo cheng shi pin, pei {mood} de yin yue",),
    },
    "product_promo_music": {
        "yue": ("呢個{product}整張產品相，再剪段宣傳片，配{mood}嘅音樂",),
        "pinyin": ("zhe ge {product} zuo shang pin tu, zai zuo xuan chuan shi pin, pei {mood} de yin yue",),
    },
}
# fmt: on


def render_dialect(intent: Intent, rng: random.Random) -> str:
    """A request for `intent` in Cantonese or pinyin, slots filled the same way (one draw of
    `rng`, as `foreign.render_foreign`)."""
    return render_in(intent, rng, DIALECT_TEMPLATES, DIALECT_SLOTS, DIALECTS)
