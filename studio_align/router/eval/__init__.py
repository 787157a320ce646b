"""Hand-written routing sets shipped as package data, so an installed wheel evaluates them.

- `handwritten_v1`: the first 50 hand-written requests (27 English, 23 Chinese), the same
  file as `tests/data/handwritten_routing.jsonl`.
- `handwritten_v2`: 228 requests (114 English, 114 Chinese) written before any tuning in
  styles the demo generator does not produce; each row carries a `style` tag (`long`,
  `terse`, `mixed`, `competitor`, `nickname`, `attach_text`, `typo`, `colloquial`).
  An evaluation set: never used to choose a setting.
- `handwritten_val`: 80 further hand-written requests (40 + 40) in the same styles, the
  *validation* set on which calibration, abstention thresholds and settings are chosen.
- `handwritten_val2`: 96 more validation requests (48 + 48), written before the
  colloquial-phrasing lever was built or tuned, weighted to how people actually type to a
  creative tool (Chinese particles and verbs such as 帮我/整个/搞/弄/呗/吧, fragments,
  run-on briefs, code-switching, typos, product names). Validation only, never training.
- `handwritten_val3`: 96 validation requests (46 English, 50 Chinese) written before the
  refusal lever was built, in styles weighted to what the sets above lack or have little
  of: `negation` (16), `purpose` (a request named by its use: "a jingle for my bakery's
  radio spot", "婚礼上放的"), `indirect` (the modality implied, not named), `question`,
  `voice`, `emoji`, `slang`, `formal`, `runon`, `codeswitch`, `traditional`, `spec`,
  `hashtag`, `shout`. Two rows ask for plans no demo intent has (text-to-video then a
  grade). Validation only, never training.
- `handwritten_val4`: 96 validation requests (48 English, 48 Chinese) written by a second
  author who had seen no router's misses, nor the training generator's lexicons, nor the
  evaluation sets, in styles the sets above lack: `context` (a backstory, the ask at the
  end), `reference` (a film, artist or platform named instead of the look), `correction`
  (the writer changes their mind mid-message), `plural_deliverable` (a kit or teaser that
  implies several steps), `minimal` (one or two words with an attachment),
  `professional_jargon` (b-roll, key visual, 垫乐), `multi_sentence_list` (numbered or
  bulleted lines), `polite`, `retry` (restating after a wrong result), `singlish`,
  `hashtag_nospace`, `chatty_zh_net` (家人们, 蹲一个大佬) and `homophone` (pinyin-input
  slips: 冻态, 分境). Validation only, never training.
- `handwritten_v3`: 96 requests (48 English, 48 Chinese) written before the pretrained
  encoder was built or tuned, in styles none of the sets above has: `emoji`, `voice`
  (dictation with fillers, no punctuation), `slang` (internet slang: no cap, yyds, 绝绝子,
  拉胯), `runon`, `formal` (a client's brief or email), `negation` (says what it does not
  want: "no music, just the motion"), `hashtag`, `shout` (capitals, !!!), `question`
  (indirect: "is it possible to..."), `codeswitch` (English and Chinese inside one
  clause), `spec` (key: value briefs) and `traditional` (Traditional Chinese).
  An evaluation set: never used to choose a setting.
- `handwritten_v4`: 55 requests (33 English or other languages, 22 Chinese or Japanese)
  written on 6 December 2026 before any tuning (the last 15, all Chinese, were added to
  balance the languages before any model saw them), in the way people type to generation tools rather than
  to a person: `mj_prompt` (Midjourney prompts with `--ar`), `sd_tags` (Stable Diffusion
  tag lists, weights, negative prompts), `json`, `key_value` and `markdown_brief`
  (structured briefs), `url`, `roleplay` ("You are a world-class photographer..."),
  `jargon` (i2v, t2v, tts, bgm), `cantonese`, `pinyin`, and other languages (Japanese,
  Spanish, French, German). An evaluation set: never used to choose a setting (the
  defaults' misses on it were seen before `handwritten_val5` was written).
- `handwritten_val5`: 64 validation requests (34 English or other languages, 30 Chinese)
  in the styles of `handwritten_v4`, with different requests (and Korean), written after
  it. Validation only, never training.
- `handwritten_val6`: 40 validation requests (20 English, 20 Chinese), written on 6
  December 2026 after seeing the served router read "masterpiece, best quality, 1girl,
  ..., anime style" as an anime storyboard: stills whose style words belong to another
  step's vocabulary (`style_word`, `sd_tags`: anime, manga, 二次元, a film still, a movie
  poster, a music-video look), and `control` rows where those words do ask for a
  storyboard, a video or a restyle. Validation only, never training.
- `handwritten_val7`: 48 validation requests (24 English, 24 Chinese) written on 6
  December 2026 by a third author who had seen no router's misses, nor the training
  generator, nor the evaluation sets, in twelve styles none of the sets above has, four
  rows each: `delivery_constraint` (the slot, size, length or file format first),
  `audience_effect` (the feeling it should give), `comparison` ("less X, more Y"),
  `handoff_note` (a task for a teammate, @mention and deadline), `client_quote` (the
  client's words, then the ask), `onomatopoeia` (drip... plink, 咚咚锵), `timecode`
  (timecodes, BPM, bars, words a minute), `problem_report` (what is wrong with the
  upload; the fix implied), `metaphor` (a look or sound told through taste or touch),
  `caption_first` (the post's caption, then the visual), `screenplay` (EXT. / 内景 scene
  headings) and `filename_ref` (the upload named by its file name). Validation only,
  never training.
- `handwritten_val8`: 64 validation requests written on 6 December 2026, before any model
  was run on them, in eight languages other than English and Chinese, eight rows each:
  Spanish, French, German, Portuguese, Italian, Japanese, Korean and Russian, typed the
  way a creator in that language would (slang, politeness levels, local subjects), over
  single and multi-step plans. The generator's main templates are English and Chinese;
  these rows measure what the multilingual encoder and the foreign-language lever
  (`simulate/router/foreign.py`, which writes five of the eight) carry to the rest. Validation only,
  never training.
- `handwritten_val9`: 64 validation requests (34 English or pinyin, 30 Chinese) written on
  6 December 2026, before any model was run on them, in the structured and tool-prompt
  styles that `handwritten_v4` tests and `handwritten_val5` has only 14 rows of, eight
  rows each: `yaml_brief`, `json_brief`, `table_brief` (markdown tables), `prompt_params`
  (LoRA tags, weights, sampler and frame settings), `cli` (slash commands and flags),
  `ticket` (an issue tracker's or 需求单's fields), `checklist` (`- [ ]`, □ to-do lines,
  several deliverables), `texting` (u, pls, w/, 4) and, in Chinese, `cantonese` and
  `pinyin`. Twenty of each language's rows are one-step plans. Validation only, never
  training.
- `handwritten_val10`: 64 validation requests (32 English, 32 Chinese) written on
  6 December 2026, before any model was run on them, that carry words the creator wants
  rendered, sung or spoken: `on_image_text` (a poster's headline, a card's wording, a
  logo's name, a label, a sign), `caption` (meme text, a speech bubble, the post's
  caption), `title_card` (a video's title or closing words), `lyrics`, `dialogue` (a
  storyboard panel's line) and `speech_control` (a voiceover or announcement, whose quote
  is what is spoken). Validation only, never training.
- `handwritten_val11`: 32 validation requests (17 English, 15 Chinese) written on
  7 December 2026, before any model was run on them, each longer than the 96 text pieces
  a router keeps (131-203 pieces; `router.format.MAX_TEXT_TOKENS`), in six styles the sets
  above have none of: `email` (greeting, context, the ask in the middle, a sign-off),
  `meeting_notes` (the action item among unrelated ones), `pasted_brief` (a request
  form's fields), `backstory_end` (a long story, the ask last), `ask_first` (the ask,
  then a long explanation) and `thread` (a pasted chat, the decision at the end). Many
  also say what is *not* wanted. Every plan is one a demo intent has. Validation only,
  never training.
- `handwritten_val12`: 24 validation requests (12 English, 12 Chinese) in the six styles
  of `handwritten_val11`, other requests (116-165 pieces), written on 7 December 2026
  after the default router's misses on `handwritten_val11` were read and before any model
  ran on them: the set that scores what is chosen on `handwritten_val11`. Validation only,
  never training.
- `handwritten_val13`: 64 validation requests (32 English, 32 Chinese) written on
  7 December 2026, before any model ran on them, in eight styles the sets above have none
  of, eight rows each: `reverse_order` (the later step named first: "before that, remove
  ..."), `wish` ("if only ...", "要是能...就好了"), `poem` (a poem's line as the subject),
  `platform_format` (named by a platform's format: a TikTok, a 小红书 cover, a podcast
  jingle), `plain_simple` (a child's or a grandparent's plain words), `relayed` (someone
  else's ask passed on: "my manager wants", "老板说"), `occasion` (a festival or family
  event) and `budget_choice` (one medium chosen over another for cost: "video's too
  expensive, so just a still"). Validation only, never training.
- `handwritten_val14`: 64 validation requests (32 English, 32 Chinese) written on
  7 December 2026 after the default routers' misses on `handwritten_val13` were read and
  before any model ran on them, each naming a medium it does not ask for: `destination`
  (32: the thing the result is for, a video's thumbnail, a podcast's cover, music for a
  vlog already edited, two controls that do ask for a looping video) and `declined` (32:
  a medium left out with its reason, "the narrator quit, so there's no voice this time").
  The set that scores what is chosen on the misses of `handwritten_val13`. Validation
  only, never training.
- `handwritten_val15`: 16 validation requests (8 English, 8 Chinese), every one longer
  than the router's 96 pieces (130-178), written on 7 December 2026 after windows of
  sentences were adopted (`router/windows.py`) and before any model ran on them, in eight
  styles the long sets above have none of, one a language each: `voice_memo` (dictation
  with no punctuation at all), `forum_post`, `ticket_reply` (quoted history, then the
  ask), `ps_ask` (a friend's letter, the ask in a P.S.), `group_chat` (many short lines,
  the decision spread over them), `numbered_brief` (the ask in one numbered section),
  `complaint_then_ask` and `quoted_client` (a forwarded email under a note that narrows
  it). Validation only, never training.
- `handwritten_val16`: 64 validation requests (32 English, 32 Chinese) written on
  8 December 2026, before any model ran on them, in eight styles no set above has, eight
  rows each: `previous_result` (an earlier output named as the reference: "same vibe as
  the lighthouse picture you made me yesterday"), `accessibility` (an access need gives
  the reason: a grandparent who cannot read small print, a deaf audience), `llm_handoff`
  (a prompt another assistant wrote, pasted in), `variants` (several versions or options
  of one thing), `regional` (Indian, British and Australian English; Taiwanese and
  north-eastern Mandarin words: 相片, 影片, 整, 埋汰), `price_or_deadline` (a question
  about cost or turnaround, then the ask), `teaching` (lesson material) and `what_if`
  (a hypothetical: "what if the Eiffel Tower were made of candy?"). Validation only,
  never training.

Gold plans follow the labelling conventions of the demo intents (`demo_phrases.py`)
under the default catalog and are valid for their attachments (a test checks it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from studio_align.errors import DataError
from studio_align.router.data import read_examples

HERE = Path(__file__).resolve().parent
SETS = (
    "handwritten_v1",
    "handwritten_v2",
    "handwritten_v3",
    "handwritten_val",
    "handwritten_val2",
    "handwritten_val3",
    "handwritten_val4",
    "handwritten_v4",
    "handwritten_val5",
    "handwritten_val6",
    "handwritten_val7",
    "handwritten_val8",
    "handwritten_val9",
    "handwritten_val10",
    "handwritten_val11",
    "handwritten_val12",
    "handwritten_val13",
    "handwritten_val14",
    "handwritten_val15",
    "handwritten_val16",
)
VAL_SETS = (
    "handwritten_val",
    "handwritten_val2",
    "handwritten_val3",
    "handwritten_val4",
    "handwritten_val5",
    "handwritten_val6",
    "handwritten_val7",
    "handwritten_val8",
    "handwritten_val9",
    "handwritten_val10",
    "handwritten_val11",
    "handwritten_val12",
    "handwritten_val13",
    "handwritten_val14",
    "handwritten_val15",
    "handwritten_val16",
)
# Sets in languages other than English and Chinese: not balanced between the two.
OTHER_LANGUAGE_SETS = ("handwritten_val8",)
EVAL_SETS = ("handwritten_v1", "handwritten_v2", "handwritten_v3", "handwritten_v4")


def path(name: str) -> Path:
    """The JSONL file of a packaged set."""
    if name not in SETS:
        raise DataError(f"unknown packaged routing set {name!r}; expected one of {list(SETS)}")
    return HERE / f"{name}.jsonl"


def load(name: str) -> list[dict[str, Any]]:
    """The labelled examples of a packaged set."""
    return read_examples(path(name))
