"""The generator's corrections: a request taken back is always for another valid plan of the
same upload, the label is what the writer settles on, and the lever leaves every other
draw of the data unchanged (its own random stream)."""

from __future__ import annotations

import random

from studio_align.catalog import default_catalog
from studio_align.simulate.router.corrections import (
    RETRACT,
    SWITCH,
    retract,
    retract_decoys,
    switch,
    switch_decoys,
)
from studio_align.simulate.router.phrases import I2V, INTENTS, MUSIC, T2I
from studio_align.simulate.router.requests import generate_examples

BY_NAME = {i.name: i for i in INTENTS}


def test_decoys_share_the_upload_and_differ_in_plan() -> None:
    for intent in INTENTS:
        for other in switch_decoys(intent, INTENTS):
            assert other.attachments == intent.attachments and other.plan != intent.plan
        for other in retract_decoys(intent, INTENTS):
            extra = [s for s in other.plan if s not in intent.plan]
            assert len(extra) == 1 and extra[0] in RETRACT, (intent.name, other.name)
            assert other.attachments == intent.attachments
    fuller = {i.name for i in retract_decoys(BY_NAME["image_to_video"], INTENTS)}
    assert "animate_with_music" in fuller and "edit_then_animate" not in fuller
    assert {i.plan for i in retract_decoys(BY_NAME["text_to_image"], INTENTS)} == {
        (T2I, I2V),
        (T2I, "grading.film"),
    }
    assert retract_decoys(BY_NAME["image_video_music"], INTENTS) == []


def test_the_joined_text_ends_with_what_the_writer_wants() -> None:
    rng = random.Random(0)
    text = switch("draw a fox in the snow.", "a short video of a fox trotting", "en", rng)
    assert text.startswith("draw a fox in the snow") and text.endswith(
        "a short video of a fox trotting"
    )
    assert any(m in text for m in SWITCH["en"])
    text = retract("把这张图做成视频，配点音乐。", MUSIC, "zh", rng)
    assert text.startswith("把这张图做成视频，配点音乐") and text.endswith(RETRACT[MUSIC]["zh"])


def test_corrections_keep_labels_valid_and_the_rest_of_the_data_unchanged() -> None:
    cat = default_catalog()
    plain = generate_examples(300, seed=3, correction_prob=0.0)
    corrected = generate_examples(300, seed=3, correction_prob=0.5)
    changed = 0
    for a, b in zip(plain, corrected, strict=True):
        assert a["plan"] == b["plan"] and a["request"]["attachments"] == b["request"]["attachments"]
        assert cat.is_valid(b["plan"], b["request"]["attachments"])
        changed += a["request"]["text"] != b["request"]["text"]
    assert 110 <= changed <= 190  # about half of 300
    assert generate_examples(50, seed=3, correction_prob=0.5) == corrected[:50]
    # evaluation splits never correct themselves unless asked
    assert generate_examples(50, seed=3, split="heldout") == generate_examples(
        50, seed=3, split="heldout", correction_prob=0.0
    )
