"""Router metrics on hand-checkable cases, and the report renders."""

from __future__ import annotations

import math
import random

import pytest

from studio_align.catalog import default_catalog
from studio_align.router.evaluate import calibration, evaluate_routes, first_step_confusion
from studio_align.router.report import write_report
from studio_align.simulate.router.requests import generate_examples

EXAMPLES = [
    {
        "request": {"text": "make a video of a cat", "attachments": []},
        "plan": ["wan.text_to_video"],
    },
    {
        "request": {"text": "把这张图做成视频并配乐", "attachments": ["image"]},
        "plan": ["wan.image_to_video", "audio.music"],
    },
    {"request": {"text": "compose calm music", "attachments": []}, "plan": ["audio.music"]},
    {"request": {"text": "给这段视频调色", "attachments": ["video"]}, "plan": ["grading.film"]},
]


def test_figures_by_hand() -> None:
    preds = [
        ["wan.text_to_video"],  # exact
        ["wan.image_to_video"],  # F1 = 2*1/(1+2)
        ["wan.image_to_video"],  # invalid (no image), F1 0
        ["grading.film"],  # exact
    ]
    m = evaluate_routes(EXAMPLES, preds, [0.9, 0.6, 0.55, 0.95])
    assert m["exact_plan_accuracy"] == 0.5
    assert m["step_f1"] == pytest.approx((1 + 2 / 3 + 0 + 1) / 4)
    assert m["validity_rate"] == 0.75
    assert m["by_language"]["zh"] == {
        "n": 2,
        "exact_plan_accuracy": 0.5,
        "step_f1": pytest.approx(5 / 6),
    }
    assert m["by_language"]["en"]["exact_plan_accuracy"] == 0.5
    assert m["by_plan_length"]["2"]["exact_plan_accuracy"] == 0.0
    assert m["by_intent"]["wan.image_to_video+audio.music"]["n"] == 1
    conf = m["first_step_confusion"]
    i = conf["labels"].index
    assert conf["matrix"][i("audio.music")][i("wan.image_to_video")] == 1
    assert sum(map(sum, conf["matrix"])) == 4
    # bins: [0.5,0.6) holds 0.55 (wrong); [0.6,0.7) 0.6 (wrong); [0.9,1.0] 0.9, 0.95 (right)
    ece = (1 * 0.55 + 1 * 0.6 + 2 * (1 - 0.925)) / 4
    assert m["ece"] == pytest.approx(ece)


def test_calibration_edges() -> None:
    cal = calibration([1.0, 0.0], [True, False], n_bins=10)
    assert cal["ece"] == 0.0
    assert cal["bins"][-1]["n"] == 1 and cal["bins"][0]["n"] == 1
    assert math.isnan(cal["bins"][5]["confidence"])


def test_confusion_empty_plan_is_none_column() -> None:
    c = first_step_confusion([["audio.music"]], [[]], ["audio.music"])
    assert c["labels"] == ["audio.music", "<none>"]
    assert c["matrix"] == [[0, 1], [0, 0]]


def test_report_writes_page_and_pngs(tmp_path) -> None:
    rng = random.Random(0)
    cat = default_catalog()
    ex = generate_examples(200, seed=0)
    preds = [e["plan"] if rng.random() < 0.8 else [rng.choice(cat.names)] for e in ex]
    confs = [rng.random() for _ in ex]
    m = evaluate_routes(ex, preds, confs)
    stages = [
        {
            "stage": "sft",
            "heldout_exact": 0.9,
            "creator_agreement": 0.6,
            "validity_rate": 1.0,
            "seconds": 12.0,
        }
    ]
    page = write_report(tmp_path, m, stages=stages, extra_metrics={"handwritten": m})
    text = page.read_text(encoding="utf-8")
    for png in ("by_intent.png", "slices.png", "confusion.png", "reliability.png", "stages.png"):
        assert (tmp_path / png).stat().st_size > 5000
        assert png in text
    assert "exact-plan accuracy" in text
