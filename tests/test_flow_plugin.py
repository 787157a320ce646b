"""The flow vertical as a plugin: task, encoder, reward; checkpoints; data and creator logs."""

from __future__ import annotations

import numpy as np
import pytest
from flow_helpers import tiny_model

from studio_align.data.reader import LogReader
from studio_align.errors import CheckpointError, ConfigError
from studio_align.plugins import PluginHost
from studio_align.scoring import score_registered
from studio_align.simulate.flow.creators import CREATORS
from studio_align.simulate.flow.selections import selection_logs
from studio_align.tasks import Task
from studio_align.verticals.flow.checkpoint import load_flow, save_flow
from studio_align.verticals.flow.composition import composition_stats
from studio_align.verticals.flow.data import ALL_TAG_SETS, encode, make_dataset
from studio_align.verticals.flow.evaluate import HELDOUT_TAG_SETS, TRAIN_TAG_SETS
from studio_align.verticals.flow.task import parse_prompt


@pytest.fixture
def host() -> PluginHost:
    h = PluginHost()
    h.load_module("studio_align.verticals.flow.plugin", origin="builtin")
    return h


def test_plugin_registers_task_encoder_and_reward(host):
    assert "flow" in host.tasks and "flow-composition" in host.encoders
    task = host.task("flow")
    assert isinstance(task, Task) and "grpo" in task.algorithms
    enc = host.encoders["flow-composition"].factory()
    imgs = make_dataset(4, seed=1)[0]
    assert enc.encode_images(list(imgs)).shape == (4, enc.dim)
    out = score_registered(host, {"flow_diversity": 1.0},
                           {"images": list(imgs / 255.0), "groups": [0, 0, 1, 1]})  # fmt: skip
    assert out.total.shape == (4,) and np.all(out.total > 0)


def test_grpo_prompts_from_selection_records(host):
    task = host.task("flow")

    class _Start:
        def __init__(self) -> None:
            self.state: dict = {}

    recs = [
        {"prompt": "storyboard: close-up, night", "creator": "lumen"},
        {"prompt": "storyboard: close-up, night", "creator": "noir"},
        {"prompt": "product: lifestyle", "creator": "lumen"},
        {"prompt": "storyboard: close-up, night", "creator": "lumen"},
    ]
    start = _Start()
    prompts = task.grpo_prompts(start, recs)
    assert prompts == [
        {"prompt": 0, "creators": "lumen"},
        {"prompt": 0, "creators": "noir"},
        {"prompt": 1, "creators": "lumen"},
    ]
    verts, tags = start.state["conditions"]
    assert verts.tolist() == [1, 2] and tags.shape == (2, 16)


def test_unknown_tags_name_the_tag():
    with pytest.raises(ConfigError, match="sunset"):
        parse_prompt("storyboard: close-up, sunset")
    with pytest.raises(ConfigError, match="anime"):
        encode("anime", [])


@pytest.mark.slow  # over 10 s; the default suite stays under 15 minutes on 2 cores
def test_checkpoint_round_trip(tmp_path):
    m = tiny_model(4)
    save_flow(m, tmp_path / "ck", {"trained_by": "test"})
    m2, meta = load_flow(tmp_path / "ck")
    assert meta["trained_by"] == "test" and m2.cfg == m.cfg
    x = np.zeros((1, 8, 8, 3), np.float32)
    args = (np.array([0.5], np.float32), np.array([1], np.int32), np.zeros((1, 16), np.float32))
    np.testing.assert_allclose(np.asarray(m(x, *args)), np.asarray(m2(x, *args)), atol=1e-6)
    with pytest.raises(CheckpointError):
        load_flow(tmp_path / "missing")


def test_tag_split_and_data():
    assert not set(HELDOUT_TAG_SETS) & set(TRAIN_TAG_SETS)
    assert len(TRAIN_TAG_SETS) + len(HELDOUT_TAG_SETS) == len(ALL_TAG_SETS)
    imgs, verts, tags = make_dataset(6, seed=0)
    assert imgs.shape == (6, 32, 32, 3) and imgs.dtype == np.uint8
    assert set(verts.tolist()) <= {1, 2} and tags.sum(1).min() >= 1


def test_creators_disagree_and_logs_are_valid(tmp_path):
    imgs = make_dataset(40, seed=2)[0].astype(np.float32) / 255.0
    s = composition_stats(imgs)
    assert np.all((s["cx"] >= 0) & (s["cx"] <= 1))
    u_l, u_n = CREATORS["lumen"].utility(imgs), CREATORS["noir"].utility(imgs)
    assert np.corrcoef(u_l, u_n)[0, 1] < 0  # opposite tastes on the same images
    cand = imgs.reshape(10, 4, 32, 32, 3)
    log = selection_logs(tmp_path, cand, ["storyboard: wide"] * 10, list(CREATORS.values()))
    reader = LogReader([str(log)])
    events = [e.event for e in reader]
    assert reader.summary.invalid_count == 0 and len(events) == 20
    assert {e.creator for e in events} == {"lumen", "noir"}
