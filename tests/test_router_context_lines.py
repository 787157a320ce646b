"""Context lines: a line around the request that names no medium changes nothing else."""

from __future__ import annotations

from router_lever_helpers import lever_changes

from studio_align.router.format import is_cjk
from studio_align.simulate.router.slots import CONTEXT_LINES

MEDIA_WORDS = ("video", "clip", "photo", "image", "picture", "music", "song", "voice", "audio",
               "sound", "listen", "watch", "look", "animat", "视频", "图", "照", "画", "音",
               "歌", "声", "听", "看", "动", "片")  # fmt: skip


def test_context_prob_adds_a_line_and_keeps_the_rest_byte_identical() -> None:
    changed, n = lever_changes("context_prob", 0.2, seed=4)
    assert 0.15 < len(changed) / n < 0.25
    lines = [line.rstrip(":：.。!！") for pool in CONTEXT_LINES.values() for line in pool]
    for b, x in changed:
        text = x["request"]["text"]
        assert any(line in text for line in lines), text
        assert len(text) > len(b["request"]["text"])


def test_context_lines_name_no_medium_and_match_their_language() -> None:
    for lang, pool in CONTEXT_LINES.items():
        assert len(set(pool)) == len(pool) >= 20
        for line in pool:
            assert not any(w in line.lower() for w in MEDIA_WORDS), line
            assert is_cjk(line) == (lang == "zh"), line
