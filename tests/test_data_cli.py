"""`studio-align data validate|compile` end to end through the real root command."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner
from data_events import line, rating, route

from studio_align.cli import main
from studio_align.testing.synth import image_pool, synthetic_lines

N_VALID, M_INVALID = 40, 7


@pytest.fixture
def log(tmp_path: Path) -> tuple[Path, list[int], bytes]:
    """A log of N valid and M invalid lines at random positions (plus one blank line)."""
    images = image_pool(tmp_path, 6)
    valid = list(synthetic_lines(N_VALID, seed=5, images=images))
    invalid = [
        b"{not json\n",
        b'{"type": "rating", "prompt": "\xff"}\r\n',
        line(rating(id=7)),
        line(rating(type="comment")),
        line(route(proposed=["wan.teleport"])),
        line(rating(image="img/missing.png")),
        line({k: v for k, v in rating().items() if k != "creator"}),
    ]
    assert len(invalid) == M_INVALID
    rng = random.Random(0)
    slots = sorted(rng.sample(range(N_VALID + M_INVALID), M_INVALID))
    lines, vi, ii = [], iter(valid), iter(invalid)
    for i in range(N_VALID + M_INVALID):
        lines.append(next(ii) if i in slots else next(vi))
    lines.insert(10, b"\n")  # a blank line: counted, neither valid nor invalid
    bad_numbers = [n for n, raw in enumerate(lines, 1) if raw in invalid]
    path = tmp_path / "creator.jsonl"
    path.write_bytes(b"".join(lines))
    return path, bad_numbers, b"".join(lines[n - 1] for n in bad_numbers)


def run(*args: str):
    return CliRunner().invoke(main, [*args], catch_exceptions=False)


def test_validate_reports_the_invalid_lines_and_exits_1(log):
    path, bad, _ = log
    res = run("data", "validate", str(path))
    assert res.exit_code == 1, res.output
    reported = [int(ln.split(":")[1]) for ln in res.stdout.splitlines() if ln.startswith(str(path))]
    assert reported == bad and len(bad) == M_INVALID
    assert (
        f"lines: {N_VALID + M_INVALID + 1}  valid: {N_VALID}  invalid: {M_INVALID}  blank: 1"
        in res.stdout
    )
    for reason in (
        "bad_json",
        "non_utf8",
        "wrong_type",
        "unknown_type",
        "unknown_step",
        "missing_image",
    ):
        assert reason in res.stdout


def test_validate_with_quarantine_copies_exactly_the_invalid_lines(log, tmp_path):
    path, bad, bad_bytes = log
    q = tmp_path / "quarantine.jsonl"
    res = run("data", "validate", str(path), "--quarantine", str(q), "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert [x["line"] for x in report["invalid_lines"]] == bad
    assert (report["valid"], report["invalid"], report["blank"]) == (N_VALID, M_INVALID, 1)
    assert report["total_lines"] == N_VALID + M_INVALID + 1
    assert sum(report["by_type"].values()) == N_VALID
    assert q.read_bytes() == bad_bytes


def test_validate_json_without_quarantine_still_exits_1(log):
    path, bad, _ = log
    res = run("data", "validate", str(path), "--json")
    assert res.exit_code == 1
    assert [x["line"] for x in json.loads(res.stdout)["invalid_lines"]] == bad


def test_validate_without_image_check(log):
    path, _, _ = log
    res = run("data", "validate", str(path), "--no-check-images", "--json")
    assert json.loads(res.stdout)["invalid"] == M_INVALID - 1  # the missing image now passes


def test_compile_refuses_then_compiles_with_quarantine(log, tmp_path):
    path, _, bad_bytes = log
    out = tmp_path / "compiled"
    res = run("data", "compile", str(path), "--out", str(out))
    assert res.exit_code == 1 and "invalid line" in res.stderr
    assert not (out / "manifest.json").exists()

    q = tmp_path / "q.jsonl"
    res = run(
        "data", "compile", str(path), "--out", str(out), "--quarantine", str(q), "--seed", "3"
    )
    assert res.exit_code == 0, res.output
    assert q.read_bytes() == bad_bytes
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seed"] == 3 and manifest["lines"]["valid"] == N_VALID
    for split in ("train", "heldout"):
        for name in manifest["files"][split].values():
            assert (out / name).is_file()
    assert "selection_pairs" in res.stdout


def test_plugin_engines_are_known_steps(tmp_path):
    plugin = tmp_path / "acme_engines.py"
    plugin.write_text(
        "from studio_align.hookspecs import hookimpl\n"
        "from studio_align.catalog import Engine\n\n"
        "@hookimpl\n"
        "def studio_align_register_engines(register):\n"
        "    register(Engine('acme.upscale', frozenset({'image'}), None))\n"
    )
    log = tmp_path / "log.jsonl"
    log.write_bytes(
        line(route(proposed=["wan.image_to_video", "acme.upscale"], final=None, outcome="accepted"))
    )
    assert run("data", "validate", str(log)).exit_code == 1
    res = run("--plugin", str(plugin), "data", "validate", str(log))
    assert res.exit_code == 0, res.output


def test_bad_input_exits_2(tmp_path):
    assert run("data", "validate", str(tmp_path / "absent.jsonl")).exit_code == 2
    (tmp_path / "empty").mkdir()
    res = run("data", "validate", str(tmp_path / "empty"))
    assert res.exit_code == 2 and "no *.jsonl" in res.stderr
    res = run(
        "data", "compile", str(tmp_path), "--out", str(tmp_path / "o"), "--heldout-fraction", "2"
    )
    assert res.exit_code == 2
