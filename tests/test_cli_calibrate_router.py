"""`studio-align model calibrate-router`: a saved router's (or ensemble's) calibration,
fitted on a platform's own validation file and served from the checkpoint."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from serving_helpers import make_router_checkpoint

from studio_align.cli import main
from studio_align.router import eval as packaged
from studio_align.router.calibration import kept_rows
from studio_align.router.data import write_jsonl
from studio_align.router.ensemble import ensemble_temperature, save_ensemble
from studio_align.router.router import Router
from studio_align.simulate.router.requests import generate_examples

TRAIN = generate_examples(60, seed=0)
VAL = generate_examples(16, seed=5, split="heldout")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_router_checkpoint(tmp_path_factory.mktemp("cal") / "r", seed=0, version="v0")


def _files(tmp_path: Path, router: Router, *, right: bool) -> tuple[Path, Path]:
    """Validation labelled with the router's own plans (right) or with other plans (wrong)."""
    plans, _ = router.route_raw([e["request"] for e in VAL])
    rows = []
    for e, p in zip(VAL, plans, strict=True):
        wrong = ["audio.music"] if p != ["audio.music"] else ["audio.speech"]
        rows.append({"request": e["request"], "plan": p if right else wrong})
    write_jsonl(tmp_path / "val.jsonl", rows)
    write_jsonl(tmp_path / "train.jsonl", TRAIN)
    return tmp_path / "val.jsonl", tmp_path / "train.jsonl"


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["model", "calibrate-router", *args])
    return res.exit_code, res.output


def test_thresholds_follow_validation_and_are_served(checkpoint: Path, tmp_path: Path) -> None:
    ckpt = shutil.copytree(checkpoint, tmp_path / "r")
    router = Router.load(ckpt)
    assert router.calibration is None
    reqs = [e["request"] for e in VAL[:4]]
    for right in (True, False):
        val, train = _files(tmp_path, router, right=right)
        code, out = _run(str(ckpt), "--val", str(val), "--train", str(train), "--target", "0.9",
                         "--json")  # fmt: skip
        assert code == 0, out
        res = json.loads(out)
        assert res["target_accuracy"] == 0.9 and res["validation"] == len(VAL)
        assert res["validation_accuracy"] == (1.0 if right else 0.0)
        served = Router.load(ckpt)  # what `serve router` loads
        assert served.calibration is not None and served.calibration.target_accuracy == 0.9
        decided = served.decide(reqs)
        # right on all of validation: nothing abstains; wrong on all: everything does
        assert [d["abstain"] for d in decided] == [not right] * len(reqs)
        assert [d["plan"] for d in decided] == router.route_raw(reqs)[0]  # plans never change


def test_an_ensemble_gets_its_temperature(checkpoint: Path, tmp_path: Path) -> None:
    ens = save_ensemble([checkpoint], tmp_path / "ens")
    val, _ = _files(tmp_path, Router.load(checkpoint), right=False)
    code, out = _run(str(ens), "--val", str(val))
    assert code == 0, out
    assert "temperature" in out and ensemble_temperature(ens) == pytest.approx(
        float(out.split("temperature ")[1].split()[0]), abs=1e-3
    )
    code, out = _run(str(ens), "--val", str(val), "--target", "0.9")  # not silently ignored
    assert code == 2 and "--target" in out and "ensemble" in out


def test_bad_input_gets_one_line(checkpoint: Path, tmp_path: Path) -> None:
    val, train = _files(tmp_path, Router.load(checkpoint), right=True)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(val.read_text(encoding="utf-8") + "{not json\n", encoding="utf-8")
    cases = [
        ([str(val)], "--train"),
        ([str(bad), "--train", str(train)], f"{bad}:{len(VAL) + 1}"),
        ([str(val), "--train", str(train), "--target", "0"], "--target"),
    ]
    for args, named in cases:
        code, out = _run(str(checkpoint), "--val", *args)
        assert code == 2 and named in out, out
        assert "Traceback" not in out and len(out.strip().splitlines()) == 1
    assert not (checkpoint / "calibration.json").exists()


def test_a_reference_fits_the_thresholds_on_the_rows_both_routers_plan_alike(
    checkpoint: Path, tmp_path: Path
) -> None:
    other = make_router_checkpoint(tmp_path / "other", seed=1, version="v0")
    rows = packaged.load("handwritten_val")
    write_jsonl(tmp_path / "val.jsonl", rows)
    write_jsonl(tmp_path / "train.jsonl", TRAIN)
    reqs = [r["request"] for r in rows]
    alike = len(kept_rows(rows, Router.load(checkpoint).route_raw(reqs)[0],
                          Router.load(other).route_raw(reqs)[0]))  # fmt: skip
    assert 0 < alike < len(rows)  # the two seeds disagree somewhere, or this shows nothing
    ckpt = shutil.copytree(checkpoint, tmp_path / "r")
    args = [
        "--val",
        str(tmp_path / "val.jsonl"),
        "--train",
        str(tmp_path / "train.jsonl"),
        "--json",
    ]
    for reference, fitted in (
        (checkpoint, len(rows)),
        (other, alike if alike >= 40 else len(rows)),
    ):
        code, out = _run(str(ckpt), *args, "--reference", str(reference))
        assert code == 0, out
        assert json.loads(out)["validation"] == fitted
    ens = save_ensemble([checkpoint], tmp_path / "ens")
    code, out = _run(str(ens), "--val", str(tmp_path / "val.jsonl"), "--reference", str(other))
    assert code == 2 and "--reference" in out and len(out.strip().splitlines()) == 1
