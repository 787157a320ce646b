"""Slot fillers of the demo request generator (subjects, styles, moods, looks, ...).

Pure data. `{name}` slots in the templates of `phrases.py` and the phrases of
`lexicon.py` are filled from these per-language pools; the generator sometimes fills
a slot from the other language's pool, which is how mixed-language requests arise.
"""

from __future__ import annotations

SLOTS: dict[str, dict[str, tuple[str, ...]]] = {
    "subject": {
        "en": (
            "a cat on a windowsill",
            "a rainy neon street",
            "a lighthouse at dawn",
            "two kids flying a kite",
            "a samurai in the snow",
            "a bowl of ramen",
            "a futuristic city skyline",
            "a golden retriever puppy",
            "an old fisherman",
            "a cherry blossom garden",
            "a dragon over the mountains",
            "a cozy coffee shop",
            "an astronaut on mars",
            "a vintage red car",
            "a quiet mountain lake",
            "a street market at night",
            "a ballet dancer",
            "a robot watering plants",
        ),
        "zh": (
            "窗台上的猫",
            "下雨的霓虹街道",
            "黎明时的灯塔",
            "放风筝的两个小孩",
            "雪中的武士",
            "一碗拉面",
            "未来城市天际线",
            "金毛小狗",
            "老渔夫",
            "樱花花园",
            "山间飞龙",
            "温馨的咖啡店",
            "火星上的宇航员",
            "复古红色汽车",
            "宁静的高山湖泊",
            "夜市街景",
            "芭蕾舞者",
            "给植物浇水的机器人",
        ),
    },
    "style": {
        "en": (
            "watercolor",
            "cyberpunk",
            "oil painting",
            "pixel art",
            "ghibli",
            "minimalist",
            "photorealistic",
            "ink wash",
            "3d render",
            "vaporwave",
            "retro poster",
        ),
        "zh": (
            "水彩",
            "赛博朋克",
            "油画",
            "像素风",
            "吉卜力",
            "极简",
            "写实",
            "水墨",
            "3D渲染",
            "蒸汽波",
            "复古海报",
        ),
    },
    "dur": {
        "en": ("5 second", "10-second", "15s", "30 second", "short", "one minute"),
        "zh": ("5秒", "10秒", "15秒", "30秒", "短", "一分钟"),
    },
    "mood": {
        "en": ("upbeat", "calm", "epic", "melancholic", "lo-fi", "jazzy", "cinematic", "playful"),
        "zh": ("欢快", "舒缓", "史诗感", "忧郁", "lo-fi", "爵士", "电影感", "俏皮"),
    },
    "scene": {
        "en": (
            "a cooking vlog",
            "a product launch",
            "a wedding video",
            "a travel montage",
            "a horror trailer",
            "a yoga class",
        ),
        "zh": ("美食vlog", "产品发布会", "婚礼视频", "旅行混剪", "恐怖预告片", "瑜伽课"),
    },
    "look": {
        "en": (
            "kodak portra",
            "teal and orange",
            "warm vintage",
            "bleach bypass",
            "moody film",
            "fuji velvia",
            "black and white noir",
        ),
        "zh": ("柯达胶片", "青橙色调", "复古暖色", "漂白效果", "胶片质感", "富士胶片", "黑白电影"),
    },
    "product": {
        "en": (
            "sneaker",
            "perfume bottle",
            "wristwatch",
            "lipstick",
            "headphones",
            "coffee mug",
            "handbag",
        ),
        "zh": ("运动鞋", "香水瓶", "手表", "口红", "耳机", "咖啡杯", "手提包"),
    },
    "bg": {
        "en": (
            "white background",
            "marble countertop",
            "sunset beach",
            "pastel backdrop",
            "wooden table",
        ),
        "zh": ("白色背景", "大理石台面", "日落海滩", "马卡龙色背景", "木桌"),
    },
    "line": {
        "en": (
            "welcome to our spring sale",
            "once upon a time there was a tiny robot",
            "thanks for watching, see you next week",
            "our new app is live today",
        ),
        "zh": (
            "欢迎来到春季大促",
            "从前有一个小机器人",
            "感谢观看，下周见",
            "我们的新应用今天上线",
        ),
    },
    "voice": {
        "en": (
            "a warm female voice",
            "a deep male voice",
            "a cheerful narrator",
            "a calm announcer",
        ),
        "zh": ("温柔女声", "低沉男声", "活泼的旁白", "沉稳的播音腔"),
    },
    "story": {
        "en": (
            "a girl who finds a lost robot",
            "a cat detective solving a case",
            "two friends on a road trip",
            "a chef's first day",
            "a wizard school exam",
        ),
        "zh": (
            "女孩捡到一个迷路的机器人",
            "猫侦探破案",
            "两个朋友的公路旅行",
            "厨师的第一天",
            "魔法学校的考试",
        ),
    },
    "edit": {
        "en": (
            "replace the background with a beach",
            "remove the person on the left",
            "make the sky pink",
            "turn it into a watercolor",
            "change the shirt to red",
            "add snow to the scene",
        ),
        "zh": (
            "把背景换成海滩",
            "去掉左边的人",
            "把天空改成粉色",
            "改成水彩风格",
            "把衣服换成红色",
            "给画面加上雪",
        ),
    },
    "vrestyle": {
        "en": (
            "make it look like anime",
            "turn it into claymation",
            "give it a van gogh painting style",
            "make it look like a pixel art game",
            "turn day into night",
        ),
        "zh": (
            "变成动漫风格",
            "做成黏土动画",
            "变成梵高油画风",
            "改成像素游戏风格",
            "把白天改成夜晚",
        ),
    },
    "motion": {
        "en": (
            "slow zoom in",
            "hair blowing in the wind",
            "gentle camera pan",
            "waves moving",
            "clouds drifting",
        ),
        "zh": ("镜头慢慢推近", "头发随风飘动", "镜头缓慢平移", "海浪涌动", "云朵飘过"),
    },
}
