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

# Style words of the anime family. In `phrases` and `lexicon` they occur only in storyboard
# requests, so a router learns "anime" as storyboard; `anime_prob` in
# `requests.generate_examples` swaps them in for a `SLOTS["style"]` word, so an image, a
# clip or a restyle can be in an anime style too.
ANIME_STYLES: dict[str, tuple[str, ...]] = {
    "en": ("anime", "manga", "chibi", "90s anime"),
    "zh": ("动漫", "二次元", "日漫", "漫画", "Q版"),
}

# Subjects drawn the anime way ("an anime girl with twin tails", 二次元少女). Creators name
# the look in the noun as often as in a style word, and elsewhere in the generator those
# words only ask for a storyboard; `anime_subject_prob` in `requests.generate_examples`
# swaps one in for a `SLOTS["subject"]`, so "an anime girl" in a still or a clip is that
# still or clip's subject, not a storyboard.
# fmt: off
ANIME_SUBJECTS: dict[str, tuple[str, ...]] = {
    "en": (
        "an anime girl with twin tails eating ramen", "a manga-style samurai under falling leaves",
        "a chibi corgi in a space helmet", "a magical girl mid-transformation in a burst of ribbons",
        "an anime boy with headphones on a night bus", "a shoujo heroine blushing at a summer festival",
        "an 80s anime mecha standing in the rain", "a cel-shaded anime fox spirit",
        "an anime cat-eared barista behind a counter", "a manga detective with a trench coat",
        "a chibi version of a dragon hoarding snacks", "an anime schoolgirl waiting at a train crossing",
        "a 90s anime couple on a beach at dusk", "a manga hero with spiky hair and a sword",
        "an anime witch flying over a seaside town", "a kawaii anime bunny in a strawberry dress",
        "an anime idol on a glowing stage", "a manga villain laughing on a throne",
        "an anime pilot in a cockpit full of lights", "a chibi knight riding a hamster",
        "a hand-drawn anime shepherd boy in a wheat field", "an anime ninja leaping between chimneys",
        "a manga-style old man fishing on a pier", "an anime robot girl with glowing blue eyes",
    ),
    "zh": (
        "扎双马尾吃拉面的二次元少女", "落叶中的日漫武士", "戴宇航头盔的Q版柯基", "正在变身的魔法少女",
        "夜班公交上戴耳机的动漫少年", "夏日祭上脸红的少女漫女主", "雨中的八十年代机甲", "赛璐璐风的狐妖",
        "吧台后面的猫耳动漫店员", "穿风衣的漫画侦探", "抱着零食的Q版小龙", "在道口等电车的动漫女高中生",
        "黄昏海边的九十年代日漫情侣", "刺猬头拿着大剑的热血漫主角", "骑扫帚飞过港口的动漫魔女", "穿草莓裙的萌系兔子",
        "站在发光舞台上的二次元偶像", "坐在王座上狂笑的漫画反派", "满是仪表灯的驾驶舱里的动漫飞行员",
        "骑着仓鼠的Q版骑士", "风吹麦浪里的日系动画少女", "在屋檐间跳跃的动漫忍者", "码头钓鱼的漫画风老爷爷",
        "蓝色眼睛发光的二次元机器人少女",
    ),
}
# fmt: on

# Lines around a request that name no medium: a hand-off to a teammate, a deadline, a
# client's words, who it is for, the feeling it should leave. `context_prob` in
# `requests.generate_examples` puts one before or after a request, so a long message
# around the ask adds no step to the plan.
# fmt: off
CONTEXT_LINES: dict[str, tuple[str, ...]] = {
    "en": (
        "@Sam when you get a sec:", "quick one before the 3pm sync:",
        "handing this over to you for tonight:", "client wants this by friday, no pressure:",
        "for the spring campaign deck:", "this is for my grandma's 80th birthday, so it matters:",
        "the brief from the client, more or less:", "second attempt at explaining this:",
        "ok here's what I need:", "context: we're a tiny bakery with zero budget.",
        "the client said 'make it feel expensive'.", "goal: people should feel calm.",
        "for the team offsite on monday.", "deadline is tomorrow 9am.",
        "ping me when it's done, thanks!", "no rush, next week is fine.",
        "thanks a ton, you're a lifesaver", "sent from my phone, sorry for typos",
        "let me know if anything is unclear", "budget is tight so one version only",
        "our audience is mostly students", "the client's words: 'less corporate, more human'.",
        "I'll review it in the morning", "the boss signed off on this idea today:",
    ),
    "zh": (
        "@小林 有空帮忙处理下：", "交接一下：", "明早之前要：", "客户原话：“要高级一点，别太土。”",
        "甲方说要有温度的感觉。", "给我们小店做推广用：", "周五前给我就行", "辛苦啦，谢谢！",
        "做好了告诉我", "预算有限，出一版就行", "受众主要是大学生", "奶奶八十大寿要用的，很重要：",
        "再说明一下需求：", "我的需求是这样的：", "背景：我们是一家刚开业的小面馆。", "希望大家一下子就能感到温暖",
        "不着急，下周给也行", "有不清楚的随时问我", "老板刚拍板的方案：", "下午三点开会前要用：",
        "目标是让人觉得安心", "团建周一要用", "客户原话：“少一点商业味，多一点人味。”", "发在官网首页的：",
    ),
}
# fmt: on

# Subjects that mention motion, sound or media without asking for them: a picture *of* a
# band asks for no music, a clip of a poster wall asks for no image. `busy_prob` in
# `requests.generate_examples` swaps them in for `SLOTS["subject"]`, so the plan is
# read from what is asked, not from the nouns of the scene.
# fmt: off
BUSY_SUBJECTS: dict[str, tuple[str, ...]] = {
    "en": (
        "a jazz trio playing in a smoky bar", "a girl dancing barefoot in the rain",
        "a night train pulling into a snowy station", "a DJ at a rooftop party",
        "an old film projector in a dark room", "a singer holding a microphone under spotlights",
        "a crowd cheering at an outdoor concert", "waves crashing against black rocks",
        "a violinist busking on a street corner", "a grandfather reading a bedtime story",
        "a cinema with a glowing marquee", "a transistor radio on a kitchen table",
        "a record store full of vinyl", "fireworks exploding over a harbour",
        "a skateboarder mid-jump over stairs", "a hummingbird hovering at a flower",
        "a waterfall thundering through a jungle", "a wall covered in old movie posters",
        "a photographer kneeling with a camera", "a church choir singing at christmas",
        "a parrot that looks like it is talking", "two cats chasing a laser dot",
        "a marching band in a parade", "a podcast studio with two microphones",
        "a drummer in the middle of a solo", "a ferris wheel spinning at dusk",
        "a racing car drifting around a corner", "a kid blowing out birthday candles",
        "a busy subway platform at rush hour", "a painter at an easel by the sea",
        "a windmill turning in a storm", "an orchestra tuning up before a show",
    ),
    "zh": (
        "在小酒馆里演奏的爵士三重奏", "赤脚在雨里跳舞的女孩", "驶进雪夜车站的火车", "屋顶派对上打碟的DJ",
        "暗房里的老式放映机", "聚光灯下拿着话筒的歌手", "露天音乐节上欢呼的人群", "拍打礁石的海浪",
        "街角拉小提琴的艺人", "给孙子讲睡前故事的爷爷", "亮着霓虹招牌的老电影院", "厨房桌上的老收音机",
        "摆满黑胶唱片的唱片店", "港口上空绽放的烟花", "腾空越过台阶的滑板少年", "在花前悬停的蜂鸟",
        "丛林里轰鸣的瀑布", "贴满老电影海报的墙", "单膝跪地拍照的摄影师", "圣诞夜唱诗的合唱团",
        "像在说话的鹦鹉", "追着激光点跑的两只猫", "游行里的鼓号队", "摆着两支麦克风的播客录音间",
        "正在独奏的鼓手", "黄昏里转动的摩天轮", "漂移过弯的赛车", "吹生日蜡烛的小孩",
        "早高峰拥挤的地铁站台", "在海边画架前作画的画家", "暴风雨中转动的风车", "开演前调音的交响乐团",
    ),
}
# fmt: on

# Spoken lines whose words name pictures, films, music or scenes. `SLOTS["line"]` holds four
# plain lines per language, so in training the words inside a quoted line never name a
# medium; `spoken_prob` in `requests.generate_examples` swaps one of these in for a
# `SLOTS["line"]` line, so what a voiceover says does not choose the plan: its framing does.
# fmt: off
SPOKEN_LINES: dict[str, tuple[str, ...]] = {
    "en": (
        "imagine a city of glass at sunrise", "the music fades and the lights go down",
        "every photo tells a story, and this one starts in Lisbon",
        "cut to black. silence. then thunder.", "this video is sponsored by absolutely nobody",
        "a lighthouse, a storm and one small boat", "three, two, one, action",
        "the film you are about to see is based on a true story",
        "neon lights, rain on the windshield, one last drive", "smile, you're on camera",
        "listen closely: the forest is singing", "snow falls softly on the old mountain temple",
        "tonight's playlist is all jazz, all night",
        "our little gallery opens its doors on Saturday", "draw your own conclusions",
        "somewhere between the drums and the dawn, we found our sound",
        "frame by frame, we built this dream", "the portrait studio is closed on mondays",
        "press play and let the ocean do the talking", "a song for every season",
        "watch the sky turn gold over the harbour", "meet the painter behind the mural",
    ),
    "zh": (
        "想象一下：清晨的玻璃之城", "音乐渐渐停下，灯光暗了", "每一张照片都有故事，这一张从里斯本开始",
        "画面切黑，一片寂静，然后是雷声", "本视频没有任何赞助", "灯塔、风暴，还有一只小船",
        "三、二、一，开拍", "你即将看到的电影改编自真实故事", "霓虹灯，挡风玻璃上的雨，最后一次兜风",
        "笑一个，你在镜头里", "仔细听，森林在唱歌", "雪花轻轻落在山中古寺", "今晚的歌单，全是爵士",
        "我们的小画廊周六开门", "在鼓声和黎明之间，我们找到了自己的声音", "一帧一帧，我们拼出了这个梦",
        "照相馆周一休息", "按下播放，让大海替我们说话", "每个季节都有一首歌",
        "看港口上空的天慢慢变成金色", "认识一下这幅壁画背后的画家", "镜头拉远，故事才刚开始",
    ),
}
# fmt: on
