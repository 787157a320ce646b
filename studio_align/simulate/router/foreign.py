"""Requests in languages the main templates (`phrases.py`) do not have: Spanish, French,
German, Japanese and Korean.

The router's encoder is multilingual, but the main templates are English and Chinese, so
without these fine-tuning teaches the plan words of two languages and leaves the rest to
what the encoder carries. These templates give every demo intent one or two phrasings a
language, filled from small pools in the same language (style words include each
language's word for anime, in stills and clips as well as storyboards), so the words that
choose a plan ("anima esta foto", "この写真、後ろの人を消して") are seen in training. Portuguese,
Italian and Russian are left out on purpose: `handwritten_val8` has them, and they show
what carries to languages no training row is written in.
"""

from __future__ import annotations

import random

from studio_align.simulate.router.phrases import Intent

FOREIGN_LANGS = ("es", "fr", "de", "ja", "ko")

# fmt: off
FOREIGN_SLOTS: dict[str, dict[str, tuple[str, ...]]] = {
    "es": {
        "style": ("acuarela", "anime", "cómic", "pintura al óleo"),
        "subject": ("un perro corriendo por la playa", "una ciudad futurista de noche",
                    "una taza de café humeante", "dos niños jugando en un parque"),
        "edit": ("quita a la persona del fondo", "cambia el cielo por un atardecer",
                 "borra el logo de la camiseta"),
        "motion": ("que el agua fluya", "que las hojas se muevan con el viento",
                   "con un zoom lento hacia adelante"),
        "mood": ("relajante", "épica", "alegre"),
        "line": ("Gracias por visitarnos, vuelve pronto", "Nuevo sabor de temporada, solo este mes",
                 "Bienvenidos al canal"),
        "product": ("reloj", "perfume", "bolso"),
        "look": ("cálido y vintage", "frío y desaturado", "con grano de película antigua"),
        "story": ("un robot que aprende a cocinar", "una niña que vuela con globos",
                  "dos amigos perdidos en el bosque"),
        "vrestyle": ("estilo cómic", "como una pintura al óleo", "estilo anime"),
    },
    "fr": {
        "style": ("aquarelle", "anime", "manga", "BD"),
        "subject": ("un chat endormi sur un radiateur", "une rue de Montmartre la nuit",
                    "un surfeur sur une grosse vague", "un marché de Noël sous la neige"),
        "edit": ("supprime la personne en arrière-plan", "remplace le ciel gris par un ciel bleu",
                 "efface le texte en bas"),
        "motion": ("que les nuages défilent", "avec un léger mouvement de caméra",
                   "que ses cheveux bougent au vent"),
        "mood": ("douce", "énergique", "mystérieuse"),
        "line": ("Merci de votre fidélité, à bientôt", "Les soldes commencent demain",
                 "Bienvenue dans notre atelier"),
        "product": ("bracelet", "flacon de parfum", "sac à dos"),
        "look": ("chaud et vintage", "froid et désaturé", "façon pellicule argentique"),
        "story": ("un robot qui apprend à danser", "une princesse qui part en voyage",
                  "un dragon qui a peur du noir"),
        "vrestyle": ("façon bande dessinée", "comme une peinture à l'huile", "en style anime"),
    },
    "de": {
        "style": ("Aquarell", "Anime", "Manga", "Comic"),
        "subject": ("einem Hund, der im Schnee tobt", "einer Berghütte bei Sonnenaufgang",
                    "einem Astronauten auf einem Fahrrad", "einem Marktstand voller Äpfel"),
        "edit": ("entferne die Person im Hintergrund", "mach den Himmel dramatischer",
                 "lösch den Schriftzug unten rechts"),
        "motion": ("die Blätter sollen sich im Wind bewegen", "mit einer langsamen Kamerafahrt",
                   "das Wasser soll fließen"),
        "mood": ("entspannte", "epische", "fröhliche"),
        "line": ("Danke für Ihren Besuch, bis bald", "Jetzt neu in unserem Sortiment",
                 "Willkommen auf unserem Kanal"),
        "product": ("dieser Armbanduhr", "dieser Weinflasche", "diesem Rucksack"),
        "look": ("warm und vintage", "kühl und entsättigt", "wie alter Analogfilm"),
        "story": ("einen Roboter, der kochen lernt", "ein Mädchen, das mit Ballons fliegt",
                  "zwei Freunde, die sich im Wald verirren"),
        "vrestyle": ("im Comic-Stil", "wie ein Ölgemälde", "im Anime-Stil"),
    },
    "ja": {
        "style": ("水彩", "アニメ", "漫画", "油絵"),
        "subject": ("海辺を走る犬", "夜の未来都市", "湯気の立つコーヒー", "雪の中の小さな駅"),
        "edit": ("後ろの人を消して", "空を夕焼けに変えて", "Tシャツのロゴを消して"),
        "motion": ("水が流れるように", "木の葉が風で揺れるように", "ゆっくりズームインして"),
        "mood": ("落ち着いた", "壮大な", "明るい"),
        "line": ("ご来店ありがとうございました", "新商品、本日発売です", "チャンネル登録お願いします"),
        "product": ("腕時計", "ワインボトル", "リュック"),
        "look": ("暖かいレトロな", "青っぽく落ち着いた", "昔のフィルムのような"),
        "story": ("料理を覚えるロボット", "風船で空を飛ぶ女の子", "森で迷子になった二人の友達"),
        "vrestyle": ("漫画風に", "油絵のように", "アニメ調に"),
    },
    "ko": {
        "style": ("수채화", "애니", "만화", "유화"),
        "subject": ("해변을 달리는 강아지", "밤의 미래 도시", "김이 나는 커피 한 잔", "눈 내리는 작은 기차역"),
        "edit": ("뒤에 있는 사람 지워", "하늘을 노을로 바꿔", "티셔츠 로고 없애"),
        "motion": ("물이 흐르게", "나뭇잎이 바람에 흔들리게", "천천히 줌인되게"),
        "mood": ("잔잔한", "웅장한", "밝은"),
        "line": ("방문해 주셔서 감사합니다", "신상품 오늘 출시", "구독과 좋아요 부탁드려요"),
        "product": ("손목시계", "와인병", "백팩"),
        "look": ("따뜻한 레트로", "차갑고 채도 낮은", "옛날 필름 같은"),
        "story": ("요리를 배우는 로봇", "풍선을 타고 나는 소녀", "숲에서 길을 잃은 두 친구"),
        "vrestyle": ("만화 스타일로", "유화처럼", "애니메이션 풍으로"),
    },
}

FOREIGN_TEMPLATES: dict[str, dict[str, tuple[str, ...]]] = {
    "text_to_image": {
        "es": ("genera una imagen de {subject}", "dibújame {subject}, estilo {style}"),
        "fr": ("génère une image d'{subject}", "dessine-moi {subject} façon {style}"),
        "de": ("Erstelle ein Bild von {subject}", "zeichne mir eine Illustration von {subject} im {style}-Stil"),
        "ja": ("{subject}の画像を生成して", "{subject}のイラストを{style}風に描いてください"),
        "ko": ("{subject} 이미지 만들어줘", "{subject} 일러스트 {style} 스타일로 그려 주세요"),
    },
    "edit_image": {
        "es": ("en esta foto, {edit}", "edita la imagen: {edit}, por favor"),
        "fr": ("sur cette photo, {edit}", "retouche cette image : {edit} stp"),
        "de": ("auf diesem Foto: {edit}", "bearbeite das Bild bitte, {edit}"),
        "ja": ("この写真、{edit}", "この画像を編集して：{edit}ください"),
        "ko": ("이 사진에서 {edit}줘", "사진 수정 부탁해요: {edit}줘"),
    },
    "text_to_video": {
        "es": ("haz un video de {subject}", "quiero un clip corto de {subject}, estilo {style}"),
        "fr": ("fais une vidéo d'{subject}", "je veux un petit clip avec {subject}, style {style}"),
        "de": ("mach ein Video von {subject}", "ich will einen kurzen Clip von {subject} im {style}-Stil"),
        "ja": ("{subject}の動画を作って", "{subject}の短いクリップがほしい、{style}風で"),
        "ko": ("{subject} 영상 만들어줘", "{subject} 나오는 짧은 클립 하나 {style} 스타일로 뽑아줘"),
    },
    "image_to_video": {
        "es": ("anima esta foto, {motion}", "convierte esta imagen en un video, {motion}"),
        "fr": ("anime cette image, {motion}", "transforme cette photo en vidéo, {motion}"),
        "de": ("animiere dieses Foto, {motion}", "mach aus diesem Bild ein Video, {motion}"),
        "ja": ("この写真を動画にして、{motion}", "この画像を動かしてください、{motion}"),
        "ko": ("이 사진을 영상으로 만들어줘, {motion}", "이 이미지 움직이게 해줘, {motion}"),
    },
    "video_to_video": {
        "es": ("cambia el estilo de este video, {vrestyle}", "transforma este clip, {vrestyle}"),
        "fr": ("change le style de cette vidéo, {vrestyle}", "refais ce clip {vrestyle}"),
        "de": ("ändere den Stil dieses Videos, {vrestyle}", "mach dieses Video neu, {vrestyle}"),
        "ja": ("この動画を{vrestyle}変換して", "このクリップを{vrestyle}作り直して"),
        "ko": ("이 영상 {vrestyle} 바꿔줘", "이 클립을 {vrestyle} 다시 만들어줘"),
    },
    "music": {
        "es": ("crea una música {mood} para mi video", "compón una pista {mood} de un minuto"),
        "fr": ("compose une musique {mood} pour ma vidéo", "crée une piste {mood} d'une minute"),
        "de": ("komponiere {mood} Musik für mein Video", "erstelle einen Track, {mood} Stimmung"),
        "ja": ("動画用に{mood}BGMを作って", "{mood}曲を一分くらいで作曲して"),
        "ko": ("영상에 깔 {mood} 음악 만들어줘", "{mood} 분위기의 곡 1분짜리 작곡해 주세요"),
    },
    "speech": {
        "es": ("lee en voz alta: '{line}'", "necesito una voz en off que diga: '{line}'"),
        "fr": ("lis ce texte à voix haute : « {line} »", "il me faut une voix off qui dit : « {line} »"),
        "de": ("lies das laut vor: „{line}“", "ich brauche einen Sprecher, der sagt: „{line}“"),
        "ja": ("次の文を読み上げて：「{line}」", "「{line}」というナレーションを録って"),
        "ko": ("이 문장 읽어줘: '{line}'", "'{line}'라고 말하는 내레이션 녹음해 주세요"),
    },
    "storyboard": {
        "es": ("haz un storyboard anime de {story}", "guion gráfico estilo anime sobre {story}"),
        "fr": ("fais un storyboard anime sur {story}", "un story-board façon anime : {story}"),
        "de": ("zeichne ein Anime-Storyboard über {story}", "ein Storyboard im Anime-Stil über {story}"),
        "ja": ("{story}のアニメ絵コンテを描いて", "{story}の話でアニメ風の絵コンテをお願い"),
        "ko": ("{story} 이야기로 애니 콘티 그려줘", "{story}에 대한 애니메이션 스토리보드 부탁해요"),
    },
    "product_shot": {
        "es": ("foto de producto de este {product} con fondo blanco",
               "haz una foto profesional para tienda online de este {product}"),
        "fr": ("photo produit de ce {product} sur fond blanc", "fais une belle photo e-commerce de ce {product}"),
        "de": ("Produktfoto von {product} auf weißem Hintergrund", "mach ein Shop-Foto von {product}"),
        "ja": ("この{product}の商品写真を白背景で", "この{product}をECサイト用の写真にして"),
        "ko": ("이 {product} 제품 사진 흰 배경으로 찍어줘", "이 {product} 쇼핑몰용 상품 사진으로 만들어줘"),
    },
    "grade_image": {
        "es": ("dale a esta foto un look {look}", "corrige el color de esta imagen, algo {look}"),
        "fr": ("donne à cette photo un rendu {look}", "étalonne cette image, quelque chose de {look}"),
        "de": ("gib diesem Foto einen Look: {look}", "Color Grading für dieses Bild, {look}"),
        "ja": ("この写真を{look}色味にして", "この画像のカラーグレーディング、{look}感じで"),
        "ko": ("이 사진 색감을 {look} 느낌으로 바꿔줘", "이 이미지 컬러 그레이딩, {look} 톤으로"),
    },
    "grade_video": {
        "es": ("etalonaje de este video, look {look}", "dale a este clip un color {look}"),
        "fr": ("étalonnage de cette vidéo, {look}", "donne à ce clip une colorimétrie {look}"),
        "de": ("Color Grading für dieses Video, {look}", "gib diesem Clip einen Filmlook, {look}"),
        "ja": ("この動画を{look}色調にグレーディングして", "このクリップの色を{look}感じに"),
        "ko": ("이 영상 색보정 {look} 톤으로 해줘", "이 클립 색감 {look} 느낌으로"),
    },
    "song_video": {
        "es": ("haz un videoclip para esta canción con {subject}",
               "quiero un video musical para este tema, con {subject}"),
        "fr": ("fais un clip pour cette chanson avec {subject}", "un clip musical pour ce morceau, avec {subject}"),
        "de": ("mach ein Musikvideo zu diesem Lied mit {subject}", "ein Videoclip zu diesem Track, mit {subject}"),
        "ja": ("この曲のMVを作って、{subject}で", "この曲に合わせたミュージックビデオを、{subject}で"),
        "ko": ("이 노래 뮤직비디오 만들어줘, {subject} 나오게", "이 곡에 맞춰 뮤비 만들어 주세요, {subject}"),
    },
    "image_then_video": {
        "es": ("genera una imagen de {subject} y luego anímala",),
        "fr": ("génère une image d'{subject} puis anime-la",),
        "de": ("erstelle ein Bild von {subject} und animiere es dann",),
        "ja": ("{subject}の画像を作って、それを動画にして",),
        "ko": ("{subject} 이미지 만들고 그걸 영상으로 움직여줘",),
    },
    "animate_with_music": {
        "es": ("anima esta foto y ponle música {mood}",),
        "fr": ("anime cette photo et ajoute une musique {mood}",),
        "de": ("animiere dieses Foto und leg {mood} Musik darunter",),
        "ja": ("この写真を動かして、{mood}音楽もつけて",),
        "ko": ("이 사진 움직이게 하고 {mood} 음악도 넣어줘",),
    },
    "video_with_music": {
        "es": ("haz un video de {subject} con música {mood}",),
        "fr": ("fais une vidéo d'{subject} avec une musique {mood}",),
        "de": ("mach ein Video von {subject} mit {mood} Musik",),
        "ja": ("{subject}の動画を作って、{mood}BGMつきで",),
        "ko": ("{subject} 영상 만들고 {mood} 배경음악 깔아줘",),
    },
    "video_with_voiceover": {
        "es": ("un video de {subject} con una voz en off que diga '{line}'",),
        "fr": ("une vidéo d'{subject} avec une voix off qui dit « {line} »",),
        "de": ("ein Video von {subject} mit einer Stimme aus dem Off: „{line}“",),
        "ja": ("{subject}の動画に「{line}」というナレーションを入れて",),
        "ko": ("{subject} 영상에 '{line}' 내레이션 넣어줘",),
    },
    "edit_then_animate": {
        "es": ("en esta foto, {edit}, y después conviértela en video",),
        "fr": ("sur cette photo, {edit}, puis transforme-la en vidéo",),
        "de": ("auf diesem Foto: {edit}, danach mach ein Video daraus",),
        "ja": ("この写真、{edit}、それから動画にして",),
        "ko": ("이 사진에서 {edit}주고 그다음 영상으로 만들어줘",),
    },
    "storyboard_then_animate": {
        "es": ("storyboard anime de {story} y luego animarlo",),
        "fr": ("un storyboard anime sur {story}, puis anime-le",),
        "de": ("ein Anime-Storyboard über {story} und dann animieren",),
        "ja": ("{story}のアニメ絵コンテを描いて、それをアニメーションにして",),
        "ko": ("{story} 애니 콘티 그리고 애니메이션으로 만들어줘",),
    },
    "product_promo": {
        "es": ("foto de producto de este {product} y después un video promocional corto",),
        "fr": ("photo produit de ce {product} puis une courte vidéo promo",),
        "de": ("Produktfoto von {product} und danach ein kurzes Werbevideo",),
        "ja": ("この{product}の商品写真を撮って、そのあと短いPR動画も",),
        "ko": ("이 {product} 제품 사진 찍고 짧은 홍보 영상도 만들어줘",),
    },
    "restyle_with_music": {
        "es": ("cambia el estilo de este video ({vrestyle}) y añade música {mood}",),
        "fr": ("change le style de cette vidéo ({vrestyle}) et ajoute une musique {mood}",),
        "de": ("ändere den Stil dieses Videos ({vrestyle}) und füg {mood} Musik hinzu",),
        "ja": ("この動画を{vrestyle}変えて、{mood}BGMも追加して",),
        "ko": ("이 영상 {vrestyle} 바꾸고 {mood} 음악 추가해줘",),
    },
    "image_with_grade": {
        "es": ("crea una imagen de {subject} y aplícale un etalonaje {look}",),
        "fr": ("crée une image d'{subject} et donne-lui un étalonnage {look}",),
        "de": ("erstelle ein Bild von {subject} und gib ihm einen Filmlook, {look}",),
        "ja": ("{subject}の画像を作って、{look}フィルムの色味にして",),
        "ko": ("{subject} 이미지 만들고 {look} 필름 색감 입혀줘",),
    },
    "animate_with_grade": {
        "es": ("anima esta foto y dale al video un color {look}",),
        "fr": ("anime cette photo et donne à la vidéo un rendu {look}",),
        "de": ("animiere dieses Foto und gib dem Video einen Look: {look}",),
        "ja": ("この写真を動画にして、{look}色味にグレーディングして",),
        "ko": ("이 사진을 영상으로 만들고 색감은 {look} 톤으로",),
    },
    "grade_video_with_music": {
        "es": ("corrige el color de este clip, {look}, y ponle música {mood}",),
        "fr": ("étalonne ce clip, {look}, et ajoute une musique {mood}",),
        "de": ("Color Grading für diesen Clip ({look}) und dazu {mood} Musik",),
        "ja": ("この動画を{look}色味にして、{mood}音楽をつけて",),
        "ko": ("이 영상 {look} 톤으로 색보정하고 {mood} 음악 깔아줘",),
    },
    "image_video_music": {
        "es": ("genera una imagen de {subject}, anímala y añade música {mood}",),
        "fr": ("génère une image d'{subject}, anime-la et ajoute une musique {mood}",),
        "de": ("erstelle ein Bild von {subject}, animiere es und füg {mood} Musik hinzu",),
        "ja": ("{subject}の画像を生成して、動かして、{mood}BGMもつけて",),
        "ko": ("{subject} 이미지 생성하고 움직이게 한 다음 {mood} 음악 넣어줘",),
    },
    "product_promo_music": {
        "es": ("foto de producto de este {product}, luego un video promocional con música {mood}",),
        "fr": ("photo produit de ce {product}, puis une vidéo promo avec une musique {mood}",),
        "de": ("Produktfoto von {product}, dann ein Werbevideo mit {mood} Musik",),
        "ja": ("この{product}の商品写真、それからPR動画、{mood}音楽つきで",),
        "ko": ("이 {product} 제품 사진, 그다음 {mood} 음악 들어간 홍보 영상",),
    },
}
# fmt: on


def render_in(
    intent: Intent,
    rng: random.Random,
    templates: dict[str, dict[str, tuple[str, ...]]],
    slots: dict[str, dict[str, tuple[str, ...]]],
    langs: tuple[str, ...],
) -> str:
    """A request for `intent` in one of `langs`, from `templates` with `slots` filled in
    that language.

    The text is drawn from a generator seeded by one draw of `rng`, so a caller's stream
    advances by the same amount whatever the template (the rows a lever replaces do not
    depend on what it writes)."""
    rng = random.Random(rng.getrandbits(64))
    lang = rng.choice(langs)
    text = rng.choice(templates[intent.name][lang])
    for name, pool in slots[lang].items():
        key = "{" + name + "}"
        while key in text:
            text = text.replace(key, rng.choice(pool), 1)
    return text


def render_foreign(intent: Intent, rng: random.Random) -> str:
    """A request for `intent` in one of `FOREIGN_LANGS`, its slots filled in that language."""
    return render_in(intent, rng, FOREIGN_TEMPLATES, FOREIGN_SLOTS, FOREIGN_LANGS)
