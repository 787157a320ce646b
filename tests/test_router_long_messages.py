"""Long messages: a request inside an email, notes or a story keeps its words and its label,
the background names no medium, and what is said to be handled elsewhere is never a step
of the plan."""

from __future__ import annotations

import random

from router_lever_helpers import lever_changes

from studio_align.router.format import is_cjk
from studio_align.simulate.router.long_messages import BACKGROUND, HANDLED, with_long_context
from studio_align.simulate.router.phrases import MUSIC, SPEECH, T2V
from studio_align.simulate.router.refusals import IMAGE_STEPS, VIDEO_STEPS

MEDIA_WORDS = ("video", "clip", "photo", "image", "picture", "poster", "music", "song",
               "soundtrack", "voice", "narrat", "audio", "sound", "animat", "film", "grade",
               "colour", "视频", "图", "照片", "画", "音乐", "配乐", "歌", "配音", "旁白", "声音",
               "动画", "海报", "调色")  # fmt: skip
STEPS = {"music": {MUSIC}, "speech": {SPEECH}, "picture": IMAGE_STEPS, "video": VIDEO_STEPS}


def test_long_prob_wraps_the_request_and_keeps_the_rest_byte_identical() -> None:
    changed, n = lever_changes("long_prob", 0.2, seed=4)
    assert 0.15 < len(changed) / n < 0.25
    for b, x in changed:
        before, text = b["request"]["text"], x["request"]["text"]
        assert before.rstrip(".。") in text and len(text) > len(before) + 40, text
        assert x["plan"] == b["plan"]
        for medium, pools in HANDLED.items():  # only a medium the plan lacks is "handled"
            if any(s in text for pool in pools.values() for s in pool):
                assert not STEPS[medium] & set(x["plan"]), (medium, x["plan"])


def test_background_names_no_medium_and_pools_match_their_language() -> None:
    for lang, pool in BACKGROUND.items():
        assert len(set(pool)) == len(pool) >= 20
        for line in pool:
            assert not any(w in line.lower() for w in MEDIA_WORDS), line
            assert is_cjk(line) == (lang == "zh"), line
    for pools in HANDLED.values():
        assert set(pools) == {"en", "zh"}
        assert all(is_cjk(s) == (lang == "zh") for lang, p in pools.items() for s in p)


def test_a_plan_with_every_medium_gets_no_handled_sentence() -> None:
    plan = [T2V, MUSIC, SPEECH, next(iter(IMAGE_STEPS))]
    handled = {s for pools in HANDLED.values() for p in pools.values() for s in p}
    for i in range(50):
        text = with_long_context("make it", plan, "en", random.Random(i))
        assert "make it" in text and not any(s in text for s in handled)
