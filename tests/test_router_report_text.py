"""The router report's words: headline with gains, human labels, timings, glossary."""

from __future__ import annotations

import random
import re

from studio_align.catalog import default_catalog
from studio_align.router.evaluate import evaluate_routes
from studio_align.router.report import write_report
from studio_align.router.report_text import headline, words
from studio_align.simulate.router.requests import generate_examples

STAGES = [
    {"stage": "sft", "status": "ok", "creator_agreement": 0.622, "heldout_exact": 0.865,
     "handwritten_majority_exact": 0.32, "validity_rate": 1.0, "seconds": 135.0,
     "eval_seconds": 5.0},
    {"stage": "dpo", "status": "failed", "seconds": 3.0},
    {"stage": "grpo", "status": "ok", "creator_agreement": 0.779, "heldout_exact": 0.542,
     "handwritten_majority_exact": 0.6, "validity_rate": 1.0, "seconds": 38.0,
     "eval_seconds": 4.0},
]  # fmt: skip


def test_headline_states_first_to_last_gain_in_points():
    text = headline(STAGES)
    assert text.startswith(
        "From SFT to GRPO: agreement with creators it never saw 62.2% → 77.9% (+15.7 points)."
    )
    assert "86.5% → 54.2% (-32.3 points)" in text  # losses are stated too
    assert headline(STAGES[:1], 0.5) == "Exact-plan accuracy 50.0%."


def test_words_never_show_raw_keys():
    assert words("heldout_majority") == "held-out requests (majority creator's plan)"
    assert words("creator_agreement") == "agreement with unseen creators"
    assert words("my_new_set") == "my new set"


def test_page_has_headline_labels_all_stage_times_and_glossary(tmp_path):
    rng = random.Random(0)
    cat = default_catalog()
    ex = generate_examples(120, seed=0)
    preds = [e["plan"] if rng.random() < 0.8 else [rng.choice(cat.names)] for e in ex]
    m = evaluate_routes(ex, preds, [rng.random() for _ in ex])
    grid = tmp_path / "grading_grid.png"
    grid.write_bytes(b"\x89PNG\r\n")  # copied as is; its bytes do not matter here
    page = write_report(
        tmp_path / "rep",
        m,
        stages=STAGES,
        extra_metrics={"heldout_majority": m},
        main_set="creators",
        timings=[("grading", 133.0)],
        extra_images=[("Colour grading: source | untuned | BC | GRPO", grid)],
    )
    html = page.read_text(encoding="utf-8")
    assert "class='headline'>From SFT to GRPO" in html
    assert "exact-plan accuracy: unseen creators&#x27; preferred plans" in html
    assert "held-out requests (majority creator&#x27;s plan)" in html
    assert not re.search(
        r"heldout_majority|creator_agreement|heldout_exact", html.split("<body>")[1]
    )
    assert "<dt>BC</dt><dd>behaviour cloning" in html
    assert "<dt>SFT</dt>" in html and "times.png" in html
    assert (tmp_path / "rep" / "times.png").stat().st_size > 5000
