"""`studio-align train router --logs`: raw logs in, router and report out, through the real CLI.

The end-to-end case runs the CLI in a subprocess on a tiny generated log set (simulated
creators' route events plus two invalid lines), checks the quarantine, the stages, the
checkpoint, the report and that `--config OUT/config.toml` reruns the same settings.
The bad-input cases stop before training (one line, exit 2) and run in-process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from studio_align.cli import main
from studio_align.router.data import write_jsonl
from studio_align.simulate.router.creators import demo_creator_data

ROOT = Path(__file__).resolve().parents[1]
TINY = [
    "model={d_model=32, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=16, d_ff=64, max_seq_len=128}",
    "vocab_size=400", "batch_size=8", "sft.steps=4", "dpo.steps=2", "grpo.steps=1",
    "grpo.group_size=2", "grpo.prompts_per_step=2", "preference='dpo'",
]  # fmt: skip


def _logs(root: Path) -> Path:
    data = demo_creator_data(seed=0, n_train_creators=6, n_eval_creators=2)
    path = write_jsonl(root / "logs" / "routes.jsonl", data["route_logs"])
    with open(path, "a", encoding="utf-8") as f:  # two bad lines: bad JSON, unknown step
        f.write('{"type": "route", "id": \n')
        bad = dict(data["route_logs"][0], id="bad1", proposed=["no.such_step"])
        f.write(json.dumps(bad) + "\n")
    return root / "logs"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "studio_align.cli", *args], cwd=cwd, capture_output=True,
        text=True, timeout=1800, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


@pytest.mark.slow
def test_train_router_from_logs_end_to_end(tmp_path: Path) -> None:
    logs = _logs(tmp_path)
    sets = [a for kv in TINY for a in ("--set", kv)]
    out = tmp_path / "out"
    r = _cli("train", "router", "--logs", str(logs), "--out", str(out), *sets, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "2 invalid line(s) quarantined" in r.stdout
    assert len((out / "quarantine" / "invalid.jsonl").read_text().splitlines()) == 2
    assert "[1/5] data:" in r.stdout and "[5/5] report" in r.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert [s["stage"] for s in summary["stages"]] == ["sft", "dpo", "grpo"]
    assert all(s["status"] == "ok" for s in summary["stages"]), summary["missing"]
    assert 0.0 <= summary["stages"][-1]["creator_agreement"] <= 1.0
    assert (out / "router" / "router.json").exists()
    assert (out / "router" / "calibration.json").exists()
    assert "train router --logs" in (out / "report" / "index.html").read_text()
    written = (out / "config.toml").read_text()
    settings = tomllib.loads(written)
    assert settings["sft"]["steps"] == 4 and settings["logs"] == [str(logs.resolve())]
    assert (
        tomllib.loads((out / "stages" / "dpo" / "config.toml").read_text())["train"]["steps"] == 2
    )

    # the written config reruns the same settings (here from another directory)
    again = tmp_path / "again"
    again.mkdir()
    r2 = _cli("train", "router", "--config", str(out / "config.toml"), "--out", "o2", cwd=again)
    assert r2.returncode == 0, r2.stdout[-3000:] + r2.stderr[-3000:]
    assert (again / "o2" / "config.toml").read_text() == written
    rows2 = json.loads((again / "o2" / "summary.json").read_text())["stages"]
    keys = ("heldout_exact", "creator_agreement", "handwritten_exact")
    assert [[s[k] for k in keys] for s in rows2] == [
        [s[k] for k in keys] for s in summary["stages"]
    ]


def _run(args: list[str]) -> tuple[int, str]:
    res = CliRunner().invoke(main, args)
    return res.exit_code, res.output


def test_train_router_bad_inputs(tmp_path: Path) -> None:
    only_bad = tmp_path / "bad.jsonl"
    only_bad.write_text('{"type": "route"}\n')
    no_labels = tmp_path / "abandoned.jsonl"
    no_labels.write_text(json.dumps({
        "type": "route", "id": "e1", "ts": "2026-11-01T10:00:00Z", "creator": "c1",
        "session": "s", "request": {"text": "make a video", "attachments": []},
        "proposed": ["audio.music"], "outcome": "abandoned"}) + "\n")  # fmt: skip
    cases = {
        "no such log file": ["--logs", str(tmp_path / "missing.jsonl")],
        "no valid events": ["--logs", str(only_bad)],
        "no labelled routing examples": ["--logs", str(no_labels)],
        "--logs": [],
    }
    for needle, args in cases.items():
        code, output = _run(["train", "router", *args, "--out", str(tmp_path / "o")])
        lines = [ln for ln in output.splitlines() if ln.strip()]
        assert code == 2, (needle, code, output)
        assert needle in output and "Traceback" not in output, output
        assert sum(ln.startswith("Error") for ln in lines) == 1, output
