"""A compositional lexicon for the demo generator: how people name each step, in two languages.

Pure data for `styles.py`. Where `phrases.py` holds whole-sentence templates
per intent, this holds *parts*: per catalog step, the phrases that ask for it as the
first step (`FIRST`, with `{att}` for the attached file where the step needs one) and as
a later step acting on the previous result (`THEN`); one-word requests (`TERSE`); how
people refer to an attachment (`ATT_REFS`); the products and engine nicknames people
name for a step (`BRANDS`, wrapped by `BRAND_WRAPS`); preambles and trailing details of
long, rambling briefs; and the words Chinese requests switch to English (`CODE_SWITCH`).

A step's phrases are deliberately varied in register (formal, colloquial, slang) and in
shape (verb phrase, noun phrase, "X but Y"), so combinations give sentence shapes the
whole-sentence templates never produce.
"""

from __future__ import annotations

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
)

# fmt: off
LEX_SLOTS: dict[str, dict[str, tuple[str, ...]]] = {
    "thing": {"en": ("the people in the back", "the watermark", "the power lines", "the car", "the text",
                     "that guy on the right", "the shadow", "the logo", "the street sign", "the trash can"),
              "zh": ("后面的路人", "水印", "电线", "那辆车", "上面的字", "右边那个人", "阴影", "logo", "路牌", "垃圾桶")},
    "genre": {"en": ("lofi", "jazz", "piano", "synthwave", "rock", "edm", "acoustic guitar", "strings",
                     "hip hop", "classical", "ambient", "trap", "folk", "orchestral"),
              "zh": ("lofi", "爵士", "钢琴曲", "电子乐", "摇滚", "古风", "吉他", "弦乐", "说唱", "古典", "氛围音乐",
                     "民谣", "交响乐", "国风")},
    "business": {"en": ("coffee shop", "flower store", "yoga studio", "bakery", "bike repair shop", "hair salon"),
                 "zh": ("咖啡店", "花店", "瑜伽馆", "面包店", "自行车行", "理发店")},
    "event": {"en": ("product launch", "birthday party", "school fair", "anniversary sale", "wedding", "team offsite"),
              "zh": ("新品发布", "生日派对", "校园开放日", "周年庆", "婚礼", "团建")},
    "platform": {"en": ("instagram", "tiktok", "youtube", "my website", "a flyer", "linkedin"),
                 "zh": ("小红书", "抖音", "朋友圈", "B站", "公众号", "视频号")},
}

ATT_REFS: dict[str, dict[str, tuple[str, ...]]] = {
    "image": {"en": ("this photo", "my pic", "the image i uploaded", "the attached jpg", "this shot", "my selfie",
                     "the picture below", "the png i sent", "this screenshot", "my drawing", "the photo in the attachment"),
              "zh": ("这张图", "我发的照片", "附件里的图", "上传的图片", "这张自拍", "这张截图", "我拍的这张",
                     "下面这张图", "刚发的图", "这幅画", "这张相片")},
    "video": {"en": ("this clip", "my footage", "the video i uploaded", "the attached mp4", "my vlog", "this recording",
                     "the reel i sent", "my drone shot", "the video below", "this take"),
              "zh": ("这段视频", "我传的片子", "这个录像", "附件里的视频", "这段vlog", "刚上传的素材", "这条视频",
                     "我拍的这段", "下面这个视频", "这段航拍")},
    "audio": {"en": ("my song", "this track", "the audio i sent", "the attached mp3", "my demo", "this beat"),
              "zh": ("这首歌", "我发的音频", "这段曲子", "附件里的mp3", "我的demo", "这段音乐")},
}

FIRST: dict[str, dict[str, tuple[str, ...]]] = {
    T2I: {"en": ("a pic of {subject}", "draw {subject}", "an image of {subject}", "poster of {subject}",
                 "wallpaper with {subject}", "illustrate {subject}", "a logo with {subject}", "thumbnail showing {subject}",
                 "cover art: {subject}", "concept art of {subject}", "a sticker of {subject}", "avatar of {subject}",
                 "a banner featuring {subject}", "artwork of {subject}", "sketch {subject}", "paint me {subject}",
                 "one still of {subject}", "{style} art of {subject}", "a flyer picture with {subject}"),
          "zh": ("画一张{subject}", "来张{subject}的图", "{subject}的插画", "出一张{subject}海报", "{subject}壁纸",
                 "做个{subject}的logo", "画个{subject}头像", "{subject}的封面图", "整一张{subject}", "{subject}的概念图",
                 "画个{subject}表情包", "{style}风的{subject}", "一张{subject}的图", "搞张{subject}的图片",
                 "画幅{subject}", "{subject}，出个图")},
    EDIT: {"en": ("remove {thing} from {att}", "erase {thing} in {att}", "{edit} in {att}", "clean up {att}",
                  "retouch {att}: {edit}", "fix {att}, {edit}", "get rid of {thing} on {att}", "edit {att} so we {edit}",
                  "touch up {att}", "photoshop {att}: {edit}", "{att} but {edit}", "cut {thing} out of {att}"),
           "zh": ("把{att}里的{thing}去掉", "{att}{edit}", "修一下{att}", "P掉{att}的{thing}", "{att}帮我{edit}",
                  "给{att}修个图，{edit}", "{att}里的{thing}删了", "把{att}处理下，{edit}", "{att}精修一下",
                  "抹掉{att}上的{thing}")},
    T2V: {"en": ("a video of {subject}", "a {dur} clip of {subject}", "footage of {subject}", "a vid of {subject}",
                 "b-roll of {subject}", "a short film about {subject}", "a moving scene of {subject}",
                 "a loop of {subject}", "an animation of {subject}", "film {subject}", "a {style} clip: {subject}"),
          "zh": ("一段{subject}的视频", "{dur}的{subject}短片", "{subject}的视频素材", "拍段{subject}", "做个{subject}的小视频",
                 "{subject}的空镜", "生成{subject}的动画", "整个{subject}的视频", "来段{subject}的影像",
                 "{subject}的延时视频")},
    I2V: {"en": ("animate {att}", "make {att} move", "bring {att} to life", "turn {att} into a video",
                 "a living photo from {att}", "{att} but moving", "add motion to {att}: {motion}",
                 "make {att} a {dur} loop", "video from {att}, {motion}", "{att} in motion"),
          "zh": ("让{att}动起来", "把{att}做成视频", "{att}转成动图", "{att}做成live图", "{att}加点动态，{motion}",
                 "用{att}生成视频", "{att}变成会动的", "{att}做个{dur}的动画", "让{att}活过来")},
    V2V: {"en": ("restyle {att}: {vrestyle}", "{att} but {vrestyle}", "turn {att} into {style} style",
                 "convert {att} so it looks {style}", "{vrestyle} for {att}", "give {att} a {style} makeover",
                 "transform {att} into a cartoon", "make {att} look animated"),
          "zh": ("把{att}{vrestyle}", "{att}转成{style}风格", "{att}换个画风，{vrestyle}", "{att}改成{style}风",
                 "{att}做成动漫风", "{att}视频转绘，{vrestyle}", "{att}整成卡通效果")},
    MUSIC: {"en": ("a {mood} track", "some {genre}", "a {dur} {genre} song", "bgm for {scene}", "a jingle",
                   "a {mood} beat", "music for {scene}", "a {genre} loop", "a theme tune, {mood}",
                   "background music, {genre}", "an intro sting for {platform}"),
            "zh": ("一段{mood}的音乐", "来首{genre}", "{dur}的{genre}", "{scene}的bgm", "写个片头音乐",
                   "做段{mood}的配乐", "整首{genre}", "一段{genre}纯音乐", "{mood}的背景乐")},
    SPEECH: {"en": ("read this out: {line}", "a voiceover: '{line}'", "tts: {line}", "{voice} saying '{line}'",
                    "narrate '{line}'", "say '{line}' in {voice}", "record the line '{line}'", "speak this: {line}"),
             "zh": ("念一下：{line}", "配个音：{line}", "tts：{line}", "{voice}读：{line}", "把这句转语音：{line}",
                    "录一句：{line}", "用{voice}说：{line}", "朗读：{line}")},
    BOARD: {"en": ("anime storyboard: {story}", "manga panels of {story}", "anime keyframes for {story}",
                   "a shot list in anime style for {story}", "storyboard {story}, anime look",
                   "comic frames about {story}", "anime boards for {story}"),
            "zh": ("{story}的动漫分镜", "画几格{story}的分镜", "日漫风分镜：{story}", "{story}，出个分镜脚本",
                   "二次元分镜头，{story}", "漫画分格讲{story}", "给{story}画分镜")},
    PRODUCT: {"en": ("a product shot of {att}", "turn {att} into a listing photo", "packshot of {att} on {bg}",
                     "make {att} look like a store photo", "{att} on a {bg}, shop ready", "an ecommerce image from {att}",
                     "catalog photo from {att}", "pro studio shot of the {product} in {att}"),
              "zh": ("把{att}做成商品图", "{att}做成电商主图", "{att}修成白底图", "{att}里的{product}拍成棚拍效果",
                     "{att}做成上架用的图", "用{att}出一张{bg}的产品图", "{att}弄成网店主图")},
    GRADE: {"en": ("color grade {att} {look}", "{look} look on {att}", "give {att} a {look} grade", "a {look} filter on {att}",
                   "make {att} feel like {look} film", "warm up the colours of {att}", "grade {att}, {look}",
                   "tone {att} {look}"),
            "zh": ("{att}调个{look}的色", "给{att}加{look}滤镜", "{att}调成{look}", "{att}色调改成{look}",
                   "{att}做个{look}调色", "{att}加点胶片感", "把{att}调暖一点", "{att}套个{look}的色调")},
}

THEN: dict[str, dict[str, tuple[str, ...]]] = {
    I2V: {"en": ("animate it", "make it move", "bring it to life", "turn it into a clip", "make a video from it",
                 "make it a {dur} loop", "add motion, {motion}", "get it moving"),
          "zh": ("让它动起来", "做成视频", "转成动图", "再做成{dur}的视频", "加动态，{motion}", "然后图生视频", "再让它活起来")},
    MUSIC: {"en": ("add {mood} music", "put some {genre} on it", "with {genre} bgm", "score it", "plus a {mood} track",
                   "throw a {genre} tune under it", "set it to {genre}", "with music"),
            "zh": ("配{genre}", "加点{mood}的bgm", "配个乐", "再来首{genre}", "配上{mood}音乐", "加背景音乐", "配段{genre}")},
    SPEECH: {"en": ("with a voiceover saying '{line}'", "narrated: {line}", "have {voice} say '{line}'",
                    "plus narration: {line}"),
             "zh": ("加旁白：{line}", "配音说：{line}", "让{voice}解说：{line}", "再配一句旁白：{line}")},
    GRADE: {"en": ("grade it {look}", "give it a {look} look", "{look} filter on it", "make the colours {look}",
                   "finish with a {look} grade"),
            "zh": ("调成{look}", "加{look}滤镜", "再调个{look}的色", "色调要{look}", "最后调色，{look}")},
    V2V: {"en": ("restyle it: {vrestyle}", "then {vrestyle}", "make it look {style}"),
          "zh": ("再{vrestyle}", "然后改成{style}风", "再换个画风")},
}

TERSE: dict[str, dict[str, tuple[str, ...]]] = {
    T2I: {"en": ("image", "pic", "poster", "logo", "wallpaper", "illustration", "thumbnail", "art"),
          "zh": ("出图", "画图", "海报", "壁纸", "插画", "头像", "封面", "logo")},
    EDIT: {"en": ("retouch", "remove bg", "fix photo", "photo edit", "touch up"),
           "zh": ("P图", "修图", "去水印", "抠图", "精修")},
    T2V: {"en": ("video", "clip", "b-roll", "footage"), "zh": ("视频", "短片", "生成视频", "做视频")},
    I2V: {"en": ("animate", "make it move", "image to video", "live photo"), "zh": ("图生视频", "动起来", "动图", "图转视频")},
    V2V: {"en": ("restyle", "video style transfer", "cartoonify"), "zh": ("视频转绘", "换画风", "视频风格化")},
    MUSIC: {"en": ("bgm", "music", "jingle", "beat", "soundtrack"), "zh": ("配乐", "bgm", "背景音乐", "来首歌")},
    SPEECH: {"en": ("voiceover", "tts", "narration", "voice"), "zh": ("配音", "旁白", "文字转语音", "tts")},
    BOARD: {"en": ("storyboard", "anime boards", "manga panels"), "zh": ("分镜", "动漫分镜", "分镜脚本")},
    PRODUCT: {"en": ("product shot", "packshot", "listing photo"), "zh": ("产品图", "主图", "商品图", "白底图")},
    GRADE: {"en": ("color grade", "film look", "grade", "filter"), "zh": ("调色", "滤镜", "胶片感", "调个色")},
}

BRANDS: dict[str, tuple[str, ...]] = {
    T2I: ("midjourney", "dall-e", "stable diffusion", "ideogram", "firefly", "即梦", "文心一格", "通义万相"),
    EDIT: ("photoshop", "ps", "美图秀秀", "醒图", "snapseed", "picsart"),
    T2V: ("sora", "pika", "kling", "可灵", "veo", "wan", "万相", "海螺"),
    I2V: ("pika", "kling", "可灵", "wan", "万相", "runway gen"),
    V2V: ("runway", "capcut", "剪映", "domo", "runway gen-3"),
    MUSIC: ("suno", "udio", "天音", "soundraw"),
    SPEECH: ("elevenlabs", "讯飞", "azure tts", "魔音工坊"),
    BOARD: ("storyboarder", "boords", "niji"),
    PRODUCT: ("amazon", "shopify", "etsy", "淘宝", "京东", "闲鱼", "拼多多"),
    GRADE: ("lightroom", "vsco", "davinci", "达芬奇", "醒图滤镜", "instagram filter"),
}
BRAND_WRAPS: dict[str, tuple[str, ...]] = {
    "en": ("{brand}-style: ", "like {brand} would do it: ", "{brand} pls, ", "the way {brand} does it, ",
           "", "{brand} vibes: "),
    "zh": ("{brand}那种，", "像{brand}一样，", "用{brand}的效果，", "{brand}风格：", "参考{brand}，"),
}

PREAMBLES: dict[str, tuple[str, ...]] = {
    "en": ("so i run a small {business} and", "ok long story short, for our {event} next week", "hi! first time here,",
           "my boss wants something for {platform} by friday, so", "i've been trying for hours and", "quick context: we're a {business};",
           "this is for {platform}:", "not sure if this is possible but", "for my {event},"),
    "zh": ("我开了家{business}，", "下周{event}要用，", "第一次用，不太懂，", "老板让我周五前发{platform}，",
           "折腾半天没弄好，", "我们是做{business}的，", "发{platform}用的，", "不知道能不能做，", "给{event}准备的，"),
}
DETAILS: dict[str, tuple[str, ...]] = {
    "en": ("keep it simple", "no text please", "nothing too flashy", "make it feel warm and friendly",
           "we have a tight budget", "thanks a ton", "if that makes sense", "similar to what big brands do",
           "it doesn't need to be perfect", "ideally by tonight"),
    "zh": ("简单点就行", "不要加字", "别太花哨", "温馨一点", "预算有限", "谢谢啦", "不知道说清楚没", "要有大牌的感觉",
           "不用太完美", "最好今晚能好"),
}
CONNECT: dict[str, tuple[str, ...]] = {
    "en": (", then ", " and ", " & ", ", and after that ", " + ", ". then ", ", also ", " -> ", " and then "),
    "zh": ("，然后", "，再", "，完了", "+", "，之后", "，顺便", "，最后", "，接着", "→"),
}
# Words a Chinese request switches to English (code-switching), beyond phrases'.
CODE_SWITCH: dict[str, str] = {
    "图片": "pic", "照片": "photo", "视频": "video", "音乐": "music", "配音": "voice over", "产品图": "product shot",
    "滤镜": "filter", "风格": "style", "动起来": "animate", "海报": "poster", "调色": "grading", "片子": "clip",
    "背景音乐": "BGM", "动漫": "anime", "分镜": "storyboard", "主图": "listing photo",
}
# fmt: on
