"""`calibrate_stage`: a preference stage's abstain thresholds are fitted on the validation
rows whose plan it shares with the SFT router it started from."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from serving_helpers import make_router_checkpoint

from studio_align.router import eval as packaged
from studio_align.router.calibration import kept_rows
from studio_align.router.router import Router
from studio_align.router.settings import RouterSettings, StageData
from studio_align.router.stage_run import calibrate_stage
from studio_align.simulate.router.requests import generate_examples

DATA = StageData(train=generate_examples(60, seed=0),
                 val=generate_examples(16, seed=5, split="heldout"))  # fmt: skip


def test_kept_rows_are_those_the_reference_plans_alike() -> None:
    rows = [{"request": {"text": str(i)}, "plan": ["audio.music"]} for i in range(3)]
    plans = [["audio.music"], ["audio.speech"], ["grading.film"]]
    ref = [["audio.music"], ["audio.music"], ["grading.film"]]
    assert kept_rows(rows, plans, ref) == [rows[0], rows[2]]


@pytest.fixture(scope="module")
def routers(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("stage")
    return (make_router_checkpoint(d / "a", seed=0, version="v0"),
            make_router_checkpoint(d / "b", seed=1, version="v0"))  # fmt: skip


def _fitted_on(ckpt: Path) -> int:
    return int(json.loads((ckpt / "calibration.json").read_text())["fitted_on"]["validation"])


def test_only_rows_both_routers_plan_alike_fit_the_thresholds(
    routers: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = routers
    ckpt = shutil.copytree(a, tmp_path / "a")
    cfg = RouterSettings()
    val = packaged.load("handwritten_val") + DATA.val
    req = [r["request"] for r in val]
    same = sum(p == q for p, q in zip(Router.load(a).route_raw(req)[0],
                                      Router.load(b).route_raw(req)[0], strict=True))  # fmt: skip
    assert 0 < same < len(val)  # two seeds disagree somewhere, or the test shows nothing
    calibrate_stage(ckpt, cfg, DATA)
    assert _fitted_on(ckpt) == len(val)
    calibrate_stage(ckpt, cfg, DATA, a)  # its own start: every row kept
    assert _fitted_on(ckpt) == len(val)
    calibrate_stage(ckpt, cfg, DATA, b, min_rows=0)
    assert _fitted_on(ckpt) == same
    calibrate_stage(ckpt, cfg, DATA, b, min_rows=len(val))  # too few kept: all rows
    assert _fitted_on(ckpt) == len(val)
