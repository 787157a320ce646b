"""Reward model from selection logs: pairs, split, accuracy, gate, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
from flax import nnx

from studio_align.data.compile import InvalidLogError
from studio_align.errors import CheckpointError, DataError, QualityGateError
from studio_align.reward_models.fit import FitConfig, fit_preference
from studio_align.reward_models.preference import (
    PairData,
    PreferenceModel,
    load_preference_model,
    pairwise_accuracy,
)
from studio_align.reward_models.scorer import AestheticScorer
from studio_align.reward_models.train import RewardTrainConfig, read_selection_pairs, train_reward
from studio_align.simulate.grading.creator import (
    COOL_TASTE,
    WARM_TASTE,
    SimulatedCreator,
    write_creator_logs,
)


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    out = tmp_path_factory.mktemp("logs")
    warm = SimulatedCreator("warm", WARM_TASTE, temperature=1.0)
    cool = SimulatedCreator("cool", COOL_TASTE, temperature=1.0)
    return write_creator_logs(out, [(warm, 90, 0), (cool, 30, 0)], seed=1, size=(24, 24))


def _cfg(logs, tmp_path, **kw):
    base = {
        "logs": [str(logs)],
        "out": str(tmp_path / "rm"),
        "heldout_fraction": 0.3,
        "encoder": {
            "name": "color-stats",
            "options": {"size": 24},
            "cache_dir": str(tmp_path / "cache"),
        },
        "head": {"hidden": 16},
        "train": {"steps": 150, "weight_decay": 1e-2},
        "gate": {"min_heldout_accuracy": 0.6},
    }
    base.update(kw)
    return RewardTrainConfig.model_validate(base)


def test_selections_expand_to_pairs_split_by_session(logs):
    pairs, summary = read_selection_pairs([str(logs)], seed=0, heldout_fraction=0.3)
    assert len(pairs) == 120 * 3  # 4-way selections, one chosen
    assert summary["by_type"]["selection"] == 120
    side = {}
    for p in pairs:
        side.setdefault((p["creator"], p["session"]), set()).add(p["split"])
    assert all(len(s) == 1 for s in side.values())  # a session never straddles the split
    assert {"train", "heldout"} == {p["split"] for p in pairs}


@pytest.mark.slow  # ~12 s on a busy 2-core VM: a full reward-model training run
def test_train_reward_beats_chance_and_reports_by_creator_and_session(logs, tmp_path):
    rep = train_reward(_cfg(logs, tmp_path))
    assert rep["heldout"]["accuracy"] > 0.7, rep["heldout"]
    assert set(rep["heldout"]["by_creator"]) == {"warm", "cool"}
    assert rep["heldout"]["by_session"]["sessions"] >= 2
    assert rep["gate"]["passed"] and rep["loss"]["last"] < rep["loss"]["first"]
    saved = json.loads((tmp_path / "rm" / "metrics.json").read_text())
    assert saved["heldout"]["accuracy"] == rep["heldout"]["accuracy"]
    # the bundled scorer reproduces the held-out ordering from image files
    scorer = AestheticScorer.load(tmp_path / "rm")
    model, _ = load_preference_model(tmp_path / "rm")
    assert model.creators == ["cool", "warm"]
    from PIL import Image

    pairs, _ = read_selection_pairs([str(logs)], seed=0, heldout_fraction=0.3)
    held = [p for p in pairs if p["split"] == "heldout"]
    load = lambda f: Image.open(f).convert("RGB")  # noqa: E731
    sc = scorer.score_images([load(p["chosen_image"]) for p in held], [p["creator"] for p in held])
    sr = scorer.score_images(
        [load(p["rejected_image"]) for p in held], [p["creator"] for p in held]
    )
    assert np.mean(sc > sr) == pytest.approx(rep["heldout"]["accuracy"], abs=1e-6)
    # a second run reads every embedding from the cache
    rep2 = train_reward(_cfg(logs, tmp_path, out=str(tmp_path / "rm2")))
    assert rep2["encoder"]["cache_misses"] == 0 and rep2["encoder"]["cache_hits"] == rep["images"]


def test_quality_gate_refuses_with_the_figure(logs, tmp_path):
    with pytest.raises(
        QualityGateError,
        match=r"held-out pairwise accuracy 0\.\d{3} is below the quality floor 0\.990",
    ):
        train_reward(_cfg(logs, tmp_path, gate={"min_heldout_accuracy": 0.99}))
    # saved, but refused for tuning
    with pytest.raises(QualityGateError, match="refused for tuning"):
        AestheticScorer.load(tmp_path / "rm")
    load_preference_model(tmp_path / "rm", require_gate=False)  # inspection still works


def test_single_candidate_selection_is_named(tmp_path, logs):
    bad = tmp_path / "bad.jsonl"
    line = json.loads(logs.read_text().splitlines()[0])
    line["candidates"] = line["candidates"][:1]
    line["chosen"] = [line["candidates"][0]["id"]]
    for c in line["candidates"]:
        c["image"] = str(logs.parent / c["image"])
    bad.write_text(json.dumps(line) + "\n")
    with pytest.raises(InvalidLogError, match=r"bad\.jsonl:1"):
        train_reward(_cfg(bad, tmp_path))
    # with a quarantine the line is set aside; nothing else left -> clear error, no crash
    with pytest.raises(DataError, match="no selection events"):
        train_reward(_cfg(bad, tmp_path, quarantine=str(tmp_path / "q.jsonl")))
    assert (tmp_path / "q.jsonl").read_text().strip()


def test_corrupt_image_fails_before_training_or_is_skipped(tmp_path, logs):
    import shutil

    work = tmp_path / "copy"
    shutil.copytree(logs.parent, work)
    first = json.loads((work / "logs.jsonl").read_text().splitlines()[0])
    victim = work / first["candidates"][0]["image"]
    victim.write_bytes(b"\x89PNG broken")
    with pytest.raises(DataError, match=victim.name):
        train_reward(_cfg(work / "logs.jsonl", tmp_path))
    rep = train_reward(_cfg(work / "logs.jsonl", tmp_path, skip_bad_images=True))
    assert list(rep["bad_images"]) == [str(victim)]
    lost = 3 if first["candidates"][0]["id"] in first["chosen"] else 1
    assert rep["pairs"]["train"] + rep["pairs"]["heldout"] == 120 * 3 - lost


def test_per_creator_delta_learns_an_opposite_taste():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 6)).astype(np.float32)
    w = np.array([1.0, 0.5, 0, 0, 0, 0])
    c, r = rng.integers(0, 400, (2, 1200))
    who = rng.integers(0, 2, 1200)
    first_wins = (x[c] @ w > x[r] @ w) == (who == 0)  # creator 1 likes the opposite
    chosen, rejected = np.where(first_wins, c, r), np.where(first_wins, r, c)
    data = PairData(x, chosen, rejected, who.astype(np.int32), creators=[str(k) for k in who])
    shared = PreferenceModel(6, hidden=0, creators=["0", "1"], rngs=nnx.Rngs(0))
    fit_preference(shared, data, FitConfig(steps=300, creator_l2=1e-4, learning_rate=1e-2))
    pop_only = PreferenceModel(6, hidden=0, creators=[], rngs=nnx.Rngs(0))
    fit_preference(
        pop_only, PairData(x, chosen, rejected, np.full(1200, -1, np.int32)), FitConfig(steps=300)
    )
    assert pairwise_accuracy(shared, data)["accuracy"] > 0.9
    assert (
        pairwise_accuracy(pop_only, PairData(x, chosen, rejected, np.full(1200, -1, np.int32)))[
            "accuracy"
        ]
        < 0.7
    )


def test_load_rejects_non_models(tmp_path):
    with pytest.raises(CheckpointError, match="not a preference model directory"):
        load_preference_model(tmp_path)
