"""The quickstart's flow stage on the shipped base: selections, reward model, Flow-GRPO per
creator with the quickstart's guards, the judged figures and one labelled grid each."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from studio_align.quickstart.config import QuickstartConfig
from studio_align.quickstart.flow import flow_report_parts, run_flow
from studio_align.simulate.flow.creators import CREATORS
from studio_align.verticals.flow.experiment import QUICKSTART_GUARDS


@pytest.mark.slow
def test_quickstart_flow_stage_on_the_shipped_base(tmp_path) -> None:
    lines: list[str] = []
    missing: list[str] = []
    rep = run_flow(tmp_path, QuickstartConfig(flow_grpo_steps=1), lines.append, missing)
    assert rep is not None and missing == [], missing
    keys = {f"{name}/grpo" for name in CREATORS}
    for figure in ("win_rate", "heldout_win_rate", "diversity_ratio", "fd_ratio"):
        assert set(rep[figure]) == keys
    assert all(0.0 <= w <= 1.0 for w in rep["win_rate"].values())
    assert all(r > 0 for r in rep["fd_ratio"].values())
    saved = json.loads((tmp_path / "flow" / "report.json").read_text())
    assert saved["guards"] == QUICKSTART_GUARDS.model_dump()  # the report names the guards run
    for name, path in rep["grids"].items():
        with Image.open(path) as im:  # a labelled sheet, not a bare thumbnail strip
            assert im.width >= 600 and im.height >= 400, (name, im.size)
    notes, images = flow_report_parts(rep)
    assert len(images) == len(CREATORS) and "lumen win" in notes[0]
    assert any(line.lstrip().startswith("flow ok") for line in lines)
