"""Router ensembles: the mixture's choice and confidence, the checkpoint format, `eval router`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from serving_helpers import make_router_checkpoint

from studio_align.cli import main
from studio_align.errors import CheckpointError
from studio_align.router.calibration import fit_confidence_temperature, scale_confidence
from studio_align.router.checkpoint_eval import evaluate_checkpoint
from studio_align.router.data import write_jsonl
from studio_align.router.ensemble import (
    RouterEnsemble,
    member_dirs,
    save_ensemble,
    save_temperature,
)
from studio_align.router.format import encode_plan
from studio_align.router.router import Router
from studio_align.simulate.router.requests import generate_examples

REQUESTS = [e["request"] for e in generate_examples(8, seed=4, split="heldout")]


@pytest.fixture(scope="module")
def members(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("members")
    return [make_router_checkpoint(root / f"r{s}", seed=s, version=f"v{s}") for s in range(3)]


@pytest.fixture(scope="module")
def routers(members: list[Path]) -> list[Router]:
    return [Router.load(m) for m in members]


def test_an_ensemble_of_one_is_the_router(routers: list[Router]) -> None:
    """Its confidences are the decoding's probabilities, which the mixture puts beside
    other members' scoring-pass probabilities: the two must agree for the mean to be fair."""
    router = routers[0]
    plans, _ = router.route_raw(REQUESTS)
    e_plans, e_confs = RouterEnsemble([router]).route(REQUESTS)
    assert e_plans == plans
    prompts, inits = router.encode(REQUESTS)
    scored = router.plan_logps(prompts, [encode_plan(router.tokenizer, p) for p in plans], inits)
    np.testing.assert_allclose(e_confs, np.exp(scored), rtol=1e-4)


@pytest.mark.slow  # over 7 s on two cores; default suite under 15 minutes
def test_the_plan_with_the_highest_mean_probability_wins(routers: list[Router]) -> None:
    proposals = [r.route_raw(REQUESTS)[0] for r in routers]
    plans, confs = RouterEnsemble(routers).route(REQUESTS)
    # every member's constrained probability of every proposal, by hand: one 8 x 3 grid
    grid = [[tuple(p[i]) for p in proposals] for i in range(len(REQUESTS))]
    probs = np.zeros((len(REQUESTS), len(routers)))  # [request, proposal], summed over members
    for r in routers:
        prompts, inits = r.encode(REQUESTS)
        flat = [(i, j) for i in range(len(REQUESTS)) for j in range(len(routers))]
        lp = r.plan_logps([prompts[i] for i, _ in flat],
                          [encode_plan(r.tokenizer, grid[i][j]) for i, j in flat],
                          [inits[i] for i, _ in flat])  # fmt: skip
        probs += np.exp(lp).reshape(probs.shape) / len(routers)
    disagreements = 0
    for i, req in enumerate(REQUESTS):
        cands = list(dict.fromkeys(grid[i]))
        disagreements += len(cands) > 1
        mean = [probs[i, grid[i].index(c)] for c in cands]
        best = int(np.argmax(mean))
        assert plans[i] == list(cands[best])
        assert confs[i] == pytest.approx(mean[best], rel=1e-4)
        assert routers[0].catalog.is_valid(plans[i], req["attachments"])  # a proposal: valid
    assert disagreements > 0  # random members disagree: the mixing above was exercised


def test_saved_ensemble_loads_and_scores_through_eval_router(
    members: list[Path], routers: list[Router], tmp_path: Path
) -> None:
    out = save_ensemble(members[:2], tmp_path / "ens")
    assert json.loads((out / "ensemble.json").read_text())["members"] == ["m0", "m1"]
    examples = generate_examples(16, seed=2, split="heldout")
    figures = evaluate_checkpoint(out, write_jsonl(tmp_path / "eval.jsonl", examples))
    plans, _ = RouterEnsemble(routers[:2]).route([e["request"] for e in examples])
    expected = sum(p == e["plan"] for p, e in zip(plans, examples, strict=True)) / 16
    assert figures["exact_plan_accuracy"] == pytest.approx(expected)
    assert figures["n"] == 16


@pytest.mark.parametrize("name", ["../r0", "a/b", "/etc", "..", "", 5])
def test_member_names_outside_the_directory_are_refused(name: object, tmp_path: Path) -> None:
    (tmp_path / "ensemble.json").write_text(json.dumps({"members": [name]}))
    with pytest.raises(CheckpointError, match=r"ensemble\.json") as err:
        member_dirs(tmp_path)
    assert "\n" not in str(err.value)


def test_a_link_leading_outside_is_refused(members: list[Path], tmp_path: Path) -> None:
    root = tmp_path / "ens"
    root.mkdir()
    os.symlink(members[0], root / "m0")
    (root / "ensemble.json").write_text(json.dumps({"members": ["m0"]}))
    with pytest.raises(CheckpointError, match="not a subdirectory"):
        RouterEnsemble.load(root)


def test_broken_ensemble_files_get_one_line(tmp_path: Path) -> None:
    for data in (b"{", b"[]", b'{"members": []}', b'{"other": 1}', b'{"members": ["\xff"]}'):
        (tmp_path / "ensemble.json").write_bytes(data)
        with pytest.raises(CheckpointError, match=r"ensemble\.json") as err:
            member_dirs(tmp_path)
        assert "\n" not in str(err.value)


def test_the_cli_builds_an_ensemble_and_refuses_a_non_router(
    members: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "ens"
    res = CliRunner().invoke(
        main, ["model", "ensemble-router", "--out", str(out), *map(str, members)]
    )
    assert res.exit_code == 0, res.output
    assert [p.name for p in member_dirs(out)] == ["m0", "m1", "m2"]
    (tmp_path / "empty").mkdir()
    res = CliRunner().invoke(main, ["model", "ensemble-router", "--out", str(tmp_path / "x"),
                                    str(members[0]), str(tmp_path / "empty")])  # fmt: skip
    assert res.exit_code != 0 and "not a router checkpoint" in res.output
    assert "Traceback" not in res.output and not (tmp_path / "x").exists()


def test_a_single_router_loader_names_an_ensemble(members: list[Path], tmp_path: Path) -> None:
    """`serve router` and the trainers load single routers: an ensemble gets one clear line."""
    out = save_ensemble(members[:1], tmp_path / "ens")
    with pytest.raises(CheckpointError, match="a router ensemble, not a single router"):
        Router.load(out)


def test_temperature_is_fitted_saved_and_applied(
    members: list[Path], routers: list[Router], tmp_path: Path
) -> None:
    ens = RouterEnsemble(routers)
    raw_plans, raw = ens.route_raw(REQUESTS)
    # labels that disagree with every plan: the best fit makes the mixture less confident
    examples = [{"request": r, "plan": ["no.such_step"]} for r in REQUESTS]
    t = ens.fit_temperature(examples)
    assert t == fit_confidence_temperature(raw, [False] * len(raw)) and t != 1.0
    plans, confs = ens.route(REQUESTS)
    assert plans == raw_plans  # a temperature never changes a plan
    np.testing.assert_allclose(confs, scale_confidence(raw, t))
    assert [a < b for a, b in zip(confs, raw, strict=True)] == [True] * len(raw)
    out = save_ensemble(members, tmp_path / "ens")
    save_temperature(out, t)
    assert RouterEnsemble.load(out).temperature == t


@pytest.mark.parametrize("bad", ["0", "-1", '"hot"', "true", "1e9"])
def test_a_bad_temperature_names_the_file(bad: str, members: list[Path], tmp_path: Path) -> None:
    out = save_ensemble(members[:1], tmp_path / "ens")
    (out / "ensemble.json").write_text('{"members": ["m0"], "temperature": ' + bad + "}")
    with pytest.raises(CheckpointError, match="'temperature' must be a positive number"):
        RouterEnsemble.load(out)
