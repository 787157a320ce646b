"""The quickstart's grading stage runs the file-based path: files, train grading, eval grading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from studio_align.quickstart import grading as qs_grading
from studio_align.quickstart.config import QuickstartConfig

# trains a reward model and a policy (about a minute of CPU): opt-in
pytestmark = pytest.mark.slow


def test_grading_stage_writes_platform_files_and_evaluates_the_trained_model(tmp_path, monkeypatch):
    monkeypatch.setattr(qs_grading, "DEMO_EVENTS", {"retouches": 6, "selections": 6, "ratings": 2})
    small = """run_dir = "{run_dir}"
logs = ["{logs}"]
heldout_fraction = 0.3
[train]
steps = 2
seed = {seed}
[policy]
thumbnail = 16
hidden = 8
[reward.train]
steps = 20
batch_size = 8
[reward.gate]
min_heldout_accuracy = 0.0
[bc]
steps = 10
batch_size = 8
[grpo]
prompts_per_step = 4
group_size = 4
"""
    monkeypatch.setattr(qs_grading, "RUN_TOML", small)
    lines: list[str] = []
    missing: list[str] = []
    res = qs_grading.run_grading(tmp_path, QuickstartConfig(), lines.append, missing)
    assert missing == [] and res is not None, (missing, lines)
    root = tmp_path / "grading"
    logs = root / "platform" / "logs.jsonl"
    events = [json.loads(x) for x in logs.read_text().splitlines()]
    assert {e["type"] for e in events} == {"retouch", "selection", "rating"}
    assert (root / "platform" / events[0].get("image", events[0].get("source", ""))).is_file()
    assert "logs = [" in (root / "run.toml").read_text()
    assert (root / "run" / "model" / "grading.json").is_file()
    assert Path(res["report"]).is_file() and res["grids"]
    assert res["summary"]["creators"] >= 1
    notes = qs_grading.grading_notes(res)
    assert "train grading" in notes[0] and lines and "grading ok" in lines[-1]
