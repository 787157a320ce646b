"""The grading task through the task hook, the pointwise rating losses, and logs edge cases."""

from __future__ import annotations

import json

import jax.numpy as jnp
import pytest

from studio_align.algorithms.pointwise import kto_pointwise_loss, pointwise_logistic_loss
from studio_align.errors import DataError
from studio_align.plugins import PluginHost
from studio_align.simulate.grading.platform import write_platform_demo
from studio_align.tasks import Task, supports
from studio_align.verticals.grading.logs import read_grading_logs
from studio_align.verticals.grading.model import GradingModel


@pytest.fixture(scope="module")
def platform(tmp_path_factory):
    root = tmp_path_factory.mktemp("platform")
    return write_platform_demo(root, retouches=4, selections=3, ratings=2, size=24,
                               creators=["ana", "bo"])  # fmt: skip


def test_grading_task_registers_on_a_fresh_host_and_meets_the_protocol(platform, tmp_path):
    host = PluginHost()
    host.load_module("studio_align.verticals.grading.plugin", origin="builtin")
    assert "grading" in host.tasks
    task = host.task("grading")
    assert isinstance(task, Task) and supports(task, "grpo") and not supports(task, "sft")
    data = read_grading_logs([str(platform)], heldout_fraction=0.0)
    records = [{"image": r.image, "creator": r.creator, "after": dict(zip(
        ("exposure", "contrast"), r.after[:2].tolist(), strict=True))} for r in data.retouches]  # fmt: skip
    start = task.start(type("M", (), {"init_from": None})(), seed=0, records=records)
    figs = task.evaluate(start, records)
    assert figs["n"] == len(records) and figs["delta_e2000"] >= 0
    prompts = task.grpo_prompts(start, records)
    assert prompts[0]["sources"].shape == (64, 64, 3) and prompts[0]["creators"] in ("ana", "bo")
    policy = task.policy(start, None, max_prompt_len=0)
    import jax

    ro = policy.sample(start.model, [0, 1], 3, jax.random.key(0))
    assert len(ro) == 6 and ro.old_logps.shape == (6, 9)
    path = task.save(start, tmp_path / "m", trained_by="test", metrics=figs)
    assert GradingModel.load(path).creators == ["ana", "bo", "newcomer"]


def test_pointwise_losses_prefer_the_right_side_of_the_reference():
    s = jnp.array([2.0, -2.0, 0.5, -0.5])
    up = jnp.array([True, False, False, True])
    for fn in (pointwise_logistic_loss, kto_pointwise_loss):
        loss, m = fn(s, up, 0.0)
        assert float(m["accuracy"]) == 0.5
        better, _ = fn(s, jnp.array([True, False, True, False]), 0.0)
        assert float(better) < float(loss)
        w, _ = fn(s, up, 0.0, weights=jnp.array([1.0, 1.0, 0.0, 0.0]))
        assert float(w) < float(loss)  # the two wrong ones carry no weight
    # KTO's value is bounded per sample; the logistic loss is not
    far, _ = kto_pointwise_loss(jnp.array([-100.0]), jnp.array([True]), 0.0)
    assert float(far) <= 1.0


def test_logs_reader_groups_sessionless_events_by_day_and_validates_grades(tmp_path):
    img = tmp_path / "a.png"
    from PIL import Image

    Image.new("RGB", (8, 8)).save(img)
    base = {"type": "retouch", "creator": "c", "image": "a.png",
            "before": {"exposure": 0.0}, "after": {"exposure": 0.2}}  # fmt: skip
    lines = [
        {**base, "id": "1", "ts": "2026-11-01T10:00:00Z"},
        {**base, "id": "2", "ts": "2026-11-02T10:00:00Z"},
        {"type": "selection", "id": "3", "ts": "2026-11-02T10:00:00Z", "creator": "c",
         "session": "s", "prompt": "p", "source": "a.png", "chosen": ["x"],
         "candidates": [{"id": "x", "image": "a.png", "grade": {"exposure": 0.1}},
                        {"id": "y", "image": "a.png", "grade": {"bloom": 0.1}}]},
    ]  # fmt: skip
    log = tmp_path / "l.jsonl"
    log.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    with pytest.raises(DataError, match=r"l\.jsonl:3: candidates\[1\]\.grade.*bloom"):
        read_grading_logs([str(log)])
    data = read_grading_logs([str(log)], strict=False)
    assert [r.session for r in data.retouches] == ["day:2026-11-01", "day:2026-11-02"]
    assert data.skipped["invalid_grade"] == 1 and not data.selections
