"""An output never replaces an input: `grade --out`, the demo logs, `model ensemble-router`.
Each is refused in one line before anything is written, and the input is left as it was."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from serving_helpers import make_router_checkpoint

from studio_align.cli import main
from studio_align.errors import CheckpointError, DataError
from studio_align.router.ensemble import check_members, save_ensemble
from studio_align.verticals.grading.apply import check_outputs, expand_inputs


def _images(d: Path, *names: str) -> list[Path]:
    d.mkdir(parents=True, exist_ok=True)
    for n in names:
        (d / n).write_bytes(b"\x89PNG not really")
    return [d / n for n in names]


def test_grading_into_an_input_folder_or_two_inputs_onto_one_name_is_refused(
    tmp_path: Path,
) -> None:
    imgs = tmp_path / "imgs"
    _images(imgs, "a.png", "b.jpg")
    files = expand_inputs([imgs])
    with pytest.raises(DataError, match=r"a\.png: --out .* would write over this input"):
        check_outputs(files, imgs)
    with pytest.raises(DataError, match="would write over"):  # the same folder, spelt otherwise
        check_outputs(files, tmp_path / "x" / ".." / "imgs")
    (x,) = _images(tmp_path / "x", "a.png")
    (y,) = _images(tmp_path / "y", "a.png")
    with pytest.raises(DataError, match=r"would both be written to .*/out/a\.png"):
        check_outputs(expand_inputs([x, y]), tmp_path / "out")
    check_outputs(files, tmp_path / "out")  # a separate folder is fine


@pytest.mark.parametrize(("command", "log"), [("demo-grading", "logs.jsonl"),
                                               ("demo-flow", "selections.jsonl")])  # fmt: skip
def test_a_demo_never_replaces_an_existing_log(tmp_path: Path, command: str, log: str) -> None:
    existing = tmp_path / log
    existing.write_text('{"a real": "export"}\n')
    r = CliRunner().invoke(main, ["data", command, "--out", str(tmp_path)])
    assert r.exit_code == 2, r.output
    assert f"{existing}: already exists" in r.output and "Traceback" not in r.output
    assert existing.read_text() == '{"a real": "export"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == [log]


def test_an_ensemble_that_overlaps_a_member_or_repeats_one_is_refused(tmp_path: Path) -> None:
    a = make_router_checkpoint(tmp_path / "a", seed=0, version="a")
    b = make_router_checkpoint(tmp_path / "b", seed=1, version="b")
    before = sorted(p.name for p in a.iterdir())
    for out in (a, a / "ens", tmp_path):  # the member itself, inside it, holding it
        with pytest.raises(CheckpointError, match="overlaps the member"):
            save_ensemble([a, b], out)
    with pytest.raises(CheckpointError, match="given twice"):
        check_members([a, tmp_path / "a" / "."], tmp_path / "ens")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("keep me")
    with pytest.raises(CheckpointError, match="not empty"):
        save_ensemble([a, b], busy)
    assert sorted(p.name for p in a.iterdir()) == before and not (a / "ens").exists()
    assert (busy / "notes.txt").read_text() == "keep me"
    r = CliRunner().invoke(
        main, ["model", "ensemble-router", "--out", str(tmp_path / "one"), str(a)]
    )
    assert r.exit_code == 2 and "at least two routers" in r.output, r.output
    cut = Path(shutil.copytree(b, tmp_path / "cut"))
    (cut / "params.safetensors").write_bytes((b / "params.safetensors").read_bytes()[:1000])
    r = CliRunner().invoke(
        main, ["model", "ensemble-router", "--out", str(tmp_path / "e"), str(a), str(cut)]
    )
    assert r.exit_code == 2 and "params.safetensors" in r.output and not (tmp_path / "e").exists()
    assert save_ensemble([a, b], tmp_path / "ens").joinpath("m1", "router.json").is_file()
