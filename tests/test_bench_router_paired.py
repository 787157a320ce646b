"""`bench/router_paired.py` flags a set only when its drop is past both the floor and the
seeds' noise, and pools the noise with earlier paired runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_helpers import load_bench


def _paired():  # type: ignore[no-untyped-def]
    return load_bench("router_paired")


def test_a_steady_drop_flags_and_a_noisy_one_does_not() -> None:
    p = _paired()
    steady = p.judge([-3.0, -3.2, -2.9, -3.1, -3.0, -2.8], [], k=2.54, floor=2.0)
    assert steady["verdict"] == "drop" and steady["mean"] == pytest.approx(-3.0)
    noisy = p.judge([-9.0, 6.0, -8.0, 5.0, -7.0, -5.0], [], k=2.54, floor=2.0)
    assert noisy["mean"] < -2.0 and noisy["verdict"] == ""
    small = p.judge([-1.0, -1.1, -0.9, -1.0], [], k=2.54, floor=2.0)
    assert small["verdict"] == ""  # steady, but under the floor
    gain = p.judge([4.0, 4.2, 3.9, 4.1], [], k=2.54, floor=2.0)
    assert gain["verdict"] == "gain"


def test_earlier_groups_add_degrees_of_freedom_about_their_own_mean() -> None:
    p = _paired()
    alone = p.judge([-3.0, -2.0, -4.0], [], k=2.0, floor=0.0)
    shifted = p.judge([-3.0, -2.0, -4.0], [[10.0, 9.0, 11.0]], k=2.0, floor=0.0)
    assert alone["dof"] == 2 and shifted["dof"] == 4
    assert shifted["sd"] == pytest.approx(alone["sd"])  # a group's offset is not noise
    assert shifted["threshold"] < alone["threshold"]  # more dof, narrower t


def test_main_reads_both_arms_by_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _paired()
    for arm, acc in (("a", 0.9), ("b", 0.8)):
        for seed in (1, 2):
            run = {k: {"exact": acc + 0.01 * seed} for k in ("handwritten_val", "pooled", "val")}
            (tmp_path / f"{arm}{seed}.json").write_text(json.dumps(run))
    p.main(["--a", str(tmp_path / "a{seed}.json"), "--b", str(tmp_path / "b{seed}.json"),
            "--seeds", "1", "2"])  # fmt: skip
    out = capsys.readouterr().out
    assert "handwritten_val " in out and "+10.0" in out and "pooled " in out
