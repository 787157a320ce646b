"""The flow product judges alignment by a reward it takes by name; the simulators' plugin
registers the simulated creators' hidden taste (`flow_taste`) as one, and a selection
round of simulated creators comes from `data demo-flow`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from flow_helpers import tiny_model

from studio_align.cli import main
from studio_align.data.reader import LogReader
from studio_align.errors import ConfigError
from studio_align.plugins import PluginHost
from studio_align.simulate.flow.creators import CREATORS
from studio_align.tasks import StartingPoint
from studio_align.verticals.flow.checkpoint import save_flow
from studio_align.verticals.flow.data import make_dataset
from studio_align.verticals.flow.evaluate import compare, judge_scores, win_rate
from studio_align.verticals.flow.task import FlowTask


@pytest.fixture
def host() -> PluginHost:
    h = PluginHost()
    h.load_module("studio_align.verticals.flow.plugin", origin="builtin")
    h.load_module("studio_align.simulate.plugin", origin="builtin")
    return h


def test_flow_taste_is_each_creators_hidden_utility_and_none_for_strangers(host):
    imgs = make_dataset(6, seed=4, size=16)[0].astype(np.float32) / 255.0
    judge = host.reward("flow_taste")
    assert judge.plugin is not None and "simulate" in judge.plugin
    for name, taste in CREATORS.items():
        np.testing.assert_array_equal(judge_scores(judge, imgs, name), taste.utility(imgs))
    mixed = judge.fn(images=list(imgs[:3]), creators=["noir", "someone", "lumen"])
    assert mixed[1] is None
    assert mixed[0] == pytest.approx(float(CREATORS["noir"].utility(imgs[:1])[0]))
    with pytest.raises(ConfigError, match="judge 'flow_taste' has no opinion on creator 'someone'"):
        judge_scores(judge, imgs, "someone")


def test_win_rate_counts_ties_half():
    assert win_rate(np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 2.0, 1.0, 5.0])) == 0.625


@pytest.mark.slow  # compiles the ODE sampler of a tiny model (~20 s on a busy 2-core VM)
def test_compare_without_a_judge_gives_the_creator_free_figures():
    model = tiny_model(0)
    data = make_dataset(32, seed=0, size=8)[0].astype(np.float32) / 255.0
    rep = compare(model, model, data_images=data, n_per_set=2, steps=2, splits=("heldout",))
    assert rep["creator"] is None and "win_rate" not in rep["heldout"]
    assert rep["heldout"]["fd/ratio"] == pytest.approx(1.0)
    with pytest.raises(ConfigError, match="a judge or a scorer scores for a creator"):
        compare(model, model, judge=object(), data_images=data)  # type: ignore[arg-type]


def test_task_and_command_take_judge_and_creators_together(host, tmp_path):
    start = StartingPoint(model=None, reference=None, state={"options": {"judge": "flow_taste"}})
    with pytest.raises(ConfigError, match="'judge' and 'creators' go together"):
        FlowTask().evaluate(start, [])
    res = CliRunner().invoke(
        main, ["eval", "flow", "--checkpoint", str(tmp_path), "--creator", "lumen"]
    )
    assert res.exit_code == 2 and "--judge and --creator go together" in res.output


@pytest.mark.slow  # samples the candidates with a tiny model: compiles the ODE sampler
def test_demo_flow_writes_a_valid_selection_round(tmp_path):
    save_flow(tiny_model(), tmp_path / "base", {"trained_by": "test"})
    args = ["data", "demo-flow", "--out", str(tmp_path / "logs"), "--checkpoint",
            str(tmp_path / "base"), "--events-per-set", "1", "--k", "2"]  # fmt: skip
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    reader = LogReader([res.output.strip()])
    events = [e.event for e in reader]
    assert reader.summary.invalid_count == 0 and {e.creator for e in events} == set(CREATORS)
    first = json.loads((tmp_path / "logs" / "selections.jsonl").read_text().splitlines()[0])
    assert (tmp_path / "logs" / first["candidates"][0]["image"]).is_file()
    bad = CliRunner().invoke(main, [*args[:4], "--creator", "nobody"])
    assert bad.exit_code == 2 and "no simulated flow creator ['nobody']" in bad.output
