"""A wider lexicon for styled requests: the names people give to what they want made.

Pure data for `styles.render_styled(lexicon=WIDE)`. `lexicon.py` names each
step mostly by its medium ("an image of", "a video of"); people more often name the
*artefact* (a profile picture, a book cover, a cinemagraph, an audiobook line, a
packshot), the *technique* (a time-lapse, a LUT, rotoscoping) or the *use* (a
livestream intro, a store listing). This adds such names per step and language, in the
same slot syntax (`{subject}`, `{att}`, `{line}`, ...), plus one-word requests, follow-up
phrases and product names.

Written from general knowledge of creative tools by an author who had seen which
hand-written validation requests the router missed, so validation figures for this lever
are weaker evidence than usual (docs/experiments/router-weight-ema-wide-lexicon-seed-vote.md).
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

Pools = dict[str, dict[str, tuple[str, ...]]]

# fmt: off
EXTRA_FIRST: Pools = {
    T2I: {"en": ("a profile picture: {subject}", "a pfp of {subject}", "an album cover with {subject}",
                 "a book cover showing {subject}", "a desktop background of {subject}", "a phone wallpaper, {subject}",
                 "an emoji of {subject}", "a meme image with {subject}", "a mascot: {subject}",
                 "character design for {subject}", "an icon of {subject}", "a tattoo design of {subject}",
                 "an invitation card with {subject}", "a greeting card featuring {subject}", "a moodboard image of {subject}",
                 "a header image: {subject}", "a print of {subject}", "a t-shirt graphic of {subject}",
                 "a pixel art {subject}", "a watercolor of {subject}", "a render of {subject}",
                 "generate a picture: {subject}", "make an image, {subject}", "a cover for my podcast, {subject}",
                 "a still frame of {subject}", "a cartoon drawing of {subject}", "an ad visual with {subject}"),
          "zh": ("做个{subject}的头像", "{subject}的专辑封面", "一张{subject}的书封", "{subject}的电脑桌面",
                 "{subject}的手机壁纸", "{subject}表情", "一套{subject}的表情包", "{subject}的吉祥物形象",
                 "{subject}的角色设定图", "{subject}的图标", "{subject}纹身图案", "{subject}的邀请函配图",
                 "{subject}贺卡", "{subject}的公众号头图", "{subject}的宣传图", "{subject}的T恤图案",
                 "像素风的{subject}", "水彩画{subject}", "一张{subject}的渲染图", "生成一张图：{subject}",
                 "{subject}的小红书封面", "{subject}的卡通形象", "帮我出个{subject}的图", "{subject}的插图一张")},
    EDIT: {"en": ("blur {thing} in {att}", "replace the background of {att}", "swap the sky in {att}",
                  "inpaint {thing} in {att}", "smooth the skin in {att}", "remove the tourists from {att}",
                  "take {thing} out of {att}", "brighten {att} and {edit}", "crop {thing} out of {att}",
                  "change the background of {att} to plain white", "retouch {att} for a portfolio",
                  "fix the lighting in {att}", "hide {thing} in {att}", "delete {thing} from {att}"),
           "zh": ("把{att}的背景换掉", "{att}换个天空", "{att}里的{thing}打码", "{att}磨个皮", "{att}去路人",
                  "{att}背景太乱，弄干净", "{att}里的{thing}抠掉", "给{att}换背景", "{att}修一下光线",
                  "把{att}里的{thing}P没", "{att}美颜一下", "{att}去掉{thing}，{edit}", "{att}帮忙处理一下{thing}")},
    T2V: {"en": ("a time-lapse of {subject}", "a slow-motion shot of {subject}", "a drone shot over {subject}",
                 "a trailer about {subject}", "a teaser of {subject}", "an intro video with {subject}",
                 "an explainer video on {subject}", "a cinematic shot of {subject}", "a {dur} reel of {subject}",
                 "a promo video: {subject}", "a music-free clip of {subject}", "motion graphics of {subject}",
                 "generate a video, {subject}", "text to video: {subject}"),
          "zh": ("{subject}的延时摄影", "{subject}的慢动作视频", "{subject}的航拍", "{subject}的预告片",
                 "{subject}的宣传片", "{subject}的片头视频", "{subject}的短视频", "来个{subject}的镜头",
                 "生成视频：{subject}", "文生视频，{subject}", "{subject}的动态画面", "{subject}的小动画",
                 "拍个{subject}的视频")},
    I2V: {"en": ("a cinemagraph from {att}", "make {subject} in {att} move", "parallax effect on {att}",
                 "make the person in {att} smile", "make {att} wave", "a live photo of {att}",
                 "animate the water in {att}", "make the clouds in {att} drift", "zoom slowly into {att}",
                 "gif from {att}", "image to video: {att}", "let {att} breathe a little, {motion}"),
          "zh": ("{att}做成动态照片", "让{att}里的人笑一下", "让{att}里的{subject}动一动", "{att}做个微动效",
                 "{att}加个推镜头", "让{att}里的水流起来", "让{att}的云飘起来", "{att}做成gif",
                 "图生视频：{att}", "老照片{att}动起来", "{att}让人物眨眨眼", "{att}加点动态效果")},
    V2V: {"en": ("rotoscope {att}", "make {att} look like a comic book", "claymation version of {att}",
                 "turn {att} into an oil painting style", "pixar-style version of {att}", "anime filter on {att}",
                 "make {att} look hand-drawn", "{att} in a watercolor style", "re-render {att} as {style}",
                 "video to video: {att}, {vrestyle}"),
          "zh": ("{att}转成漫画风", "{att}做成黏土风", "{att}变成油画风格", "{att}转皮克斯风", "{att}加动漫滤镜",
                 "{att}手绘风格化", "{att}做成水彩风", "{att}重绘成{style}", "视频转视频：{att}，{vrestyle}")},
    MUSIC: {"en": ("an intro track for my stream", "a ringtone, {mood}", "a lullaby", "outro music, {genre}",
                   "a {genre} instrumental", "a soundtrack for {scene}", "a hype track for {scene}",
                   "a theme for my podcast", "a chill {genre} playlist track", "a {dur} ad jingle, {mood}",
                   "compose {genre} for {scene}", "royalty-free {genre}"),
            "zh": ("直播开场音乐", "来个{mood}的铃声", "一首摇篮曲", "片尾曲，{genre}", "{genre}纯音乐来一段",
                   "{scene}的配乐", "{scene}用的嗨曲", "播客片头音乐", "{dur}的广告音乐，{mood}",
                   "写首{genre}", "{scene}的背景音乐，要{mood}", "做个无版权的{genre}")},
    SPEECH: {"en": ("audiobook narration: {line}", "announce: {line}", "a PA announcement: '{line}'",
                    "dub this line: {line}", "a voice message saying '{line}'", "text to speech: {line}",
                    "have a robot voice say '{line}'", "read it like a news anchor: {line}",
                    "voice line for my game: '{line}'", "podcast intro voice: {line}"),
             "zh": ("有声书朗读：{line}", "播报一下：{line}", "广播：{line}", "配一句台词：{line}",
                    "用机器人声音说：{line}", "像新闻主播一样读：{line}", "用粤语念：{line}", "用四川话读：{line}",
                    "文字转语音：{line}", "生成语音：{line}", "语音播报：{line}", "用{voice}念一下：{line}")},
    BOARD: {"en": ("an animatic for {story}", "a shot breakdown of {story}, anime style", "manga-style frames: {story}",
                   "key panels for {story}", "a comic strip of {story}, anime", "anime scene boards: {story}",
                   "thumbnails for each shot of {story}"),
            "zh": ("{story}的分镜草图", "{story}的故事板", "{story}拆成几个镜头画出来", "漫画分格：{story}",
                   "{story}，日漫风的分镜", "二次元风格分镜，{story}", "{story}的关键帧分镜")},
    PRODUCT: {"en": ("a hero shot of {att}", "a flat lay of the {product} in {att}", "amazon listing image from {att}",
                     "white background photo of {att}", "studio packshot from {att}", "a catalog image of {att}",
                     "an ad photo for the {product} in {att}", "shop photo of {att} on {bg}",
                     "make {att} look professional for my store"),
              "zh": ("{att}做个主图", "{att}拍成平铺图", "{att}做成亚马逊主图", "{att}出白底图",
                     "{att}做成详情页的图", "{att}里的{product}做成广告图", "{att}做个{bg}的商品照",
                     "{att}弄成店铺用的图", "{att}里的{product}出一张电商图")},
    GRADE: {"en": ("apply a LUT to {att}, {look}", "teal and orange grade on {att}", "a vintage look for {att}",
                   "a faded film look on {att}", "make {att} look cinematic", "film emulation on {att}, {look}",
                   "moody tones for {att}", "correct the colors of {att}", "a {look} color correction on {att}"),
            "zh": ("{att}套个LUT，{look}", "{att}调青橙色", "{att}调成复古色", "{att}加胶片质感",
                   "{att}调出电影感", "{att}调成日系", "{att}调成港风", "{att}冷色调", "{att}校色，{look}")},
}

EXTRA_THEN: Pools = {
    I2V: {"en": ("then animate the result", "make that a video", "and make it a cinemagraph", "then add motion"),
          "zh": ("再把图做成视频", "然后让画面动起来", "再做个动态版", "然后转成视频")},
    MUSIC: {"en": ("add a soundtrack", "put a {genre} track under it", "and some {mood} bgm"),
            "zh": ("再配个背景音乐", "加首{genre}", "配点{mood}的音乐")},
    SPEECH: {"en": ("then a voiceover: {line}", "add narration saying '{line}'"),
             "zh": ("再加段配音：{line}", "然后配旁白：{line}")},
    GRADE: {"en": ("then color grade it {look}", "and a {look} LUT on top"),
            "zh": ("再调个色，{look}", "最后加个{look}的滤镜")},
    V2V: {"en": ("then restyle it as {style}", "and convert it to {style} style"),
          "zh": ("再转成{style}风", "然后风格化成{style}")},
}

EXTRA_TERSE: Pools = {
    T2I: {"en": ("pfp", "avatar", "cover art", "book cover", "album art", "sticker", "emoji", "meme", "icon",
                 "desktop bg", "phone wallpaper", "flyer"),
          "zh": ("表情包", "头图", "专辑封面", "书封", "贴纸", "图标", "手机壁纸", "宣传图", "生成图片")},
    EDIT: {"en": ("blur", "replace background", "erase", "inpaint", "remove object"),
           "zh": ("换背景", "去路人", "磨皮", "打码", "去背景")},
    T2V: {"en": ("timelapse", "slow-mo", "trailer", "promo video", "text to video"),
          "zh": ("延时", "慢动作", "宣传片", "预告片", "文生视频")},
    I2V: {"en": ("cinemagraph", "animate photo", "gif it"), "zh": ("照片动起来", "动态照片", "微动效")},
    V2V: {"en": ("rotoscope", "anime filter", "video restyle"), "zh": ("动漫滤镜", "视频风格转换")},
    MUSIC: {"en": ("ringtone", "intro music", "instrumental", "theme song"), "zh": ("铃声", "片头曲", "纯音乐", "开场音乐")},
    SPEECH: {"en": ("audiobook", "announcement", "dubbing", "text to speech"), "zh": ("有声书", "播报", "朗读", "语音")},
    BOARD: {"en": ("animatic", "shot breakdown", "manga frames"), "zh": ("故事板", "分镜头", "漫画分格")},
    PRODUCT: {"en": ("hero shot", "white bg photo", "amazon image", "catalog photo"), "zh": ("详情页图", "电商图", "平铺图")},
    GRADE: {"en": ("LUT", "vintage look", "cinematic look", "color correction"), "zh": ("电影感", "复古色", "校色", "胶片")},
}

EXTRA_BRANDS: dict[str, tuple[str, ...]] = {
    T2I: ("flux", "leonardo", "canva", "nano banana", "豆包", "liblib"),
    EDIT: ("lightroom healing", "remove.bg", "photoroom", "稿定设计"),
    T2V: ("runway gen-4", "hailuo", "luma", "seedance"),
    I2V: ("luma dream machine", "海螺", "live2d"),
    V2V: ("ebsynth", "kaiber", "wonder studio"),
    MUSIC: ("musicgen", "aiva", "网易天音"),
    SPEECH: ("murf", "剪映配音", "siri"),
    BOARD: ("storyboard that", "clip studio"),
    PRODUCT: ("photoroom", "pebblely", "抖店"),
    GRADE: ("colorlab", "film convert", "泼辣修图"),
}
# fmt: on
