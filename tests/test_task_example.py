"""A third-party task, installed for real and trained through the CLI.

The example distribution `examples/task-style-tagger` registers the task `style-tagger`
through its entry point; nothing in studio-align names it. `pip install --target` puts it
in a temporary site directory that subprocesses get on `sys.path`, exactly as a
site-packages install, and `studio-align train sft` trains it from its run config.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# minutes of CPU in subprocesses or training runs: opt-in (`pytest -m slow`), so the
# default suite stays under 15 minutes on 2 cores
pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "task-style-tagger"
CLI = "from studio_align.cli import main; main()"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src") / "task-style-tagger"
    shutil.copytree(
        EXAMPLE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )
    target = tmp_path_factory.mktemp("site")
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
           "--no-index", "--disable-pip-version-check", "--quiet", "--target", str(target),
           str(src)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return target


def run(site: Path, *args: str, code: str = CLI) -> subprocess.CompletedProcess[str]:
    drop = ("STUDIO_ALIGN_PLUGINS", "STUDIO_ALIGN_BLOCK_PLUGINS", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if k not in drop} | {"PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=600
    )


def test_installed_task_is_listed(site: Path) -> None:
    done = run(site, "plugins", "list", "--json")
    assert done.returncode == 0, done.stderr
    plugins = {p["name"]: p for p in json.loads(done.stdout)}
    assert plugins["style_tagger"]["origin"] == "entry point"
    assert plugins["style_tagger"]["tasks"] == ["style-tagger"]
    assert plugins["routing"]["tasks"] == ["router"]


def test_installed_task_trains_through_the_cli(site: Path, tmp_path: Path) -> None:
    made = run(site, "data", "demo-style-tagger", "--out", str(tmp_path))  # the example's command
    assert made.returncode == 0, made.stderr
    done = run(site, "train", "sft", "--config", made.stdout.strip(), "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    before, after = out["heldout_before"]["exact"], out["heldout"]["exact"]
    assert before < 0.5 < after  # five styles: chance is 0.2; held-out phrasings are unseen
    saved = json.loads((Path(out["checkpoint"]) / "style_tagger.json").read_text())
    assert saved["task"] == "style-tagger" and saved["trained_by"] == "sft"


def test_unknown_task_is_a_one_line_error(site: Path, tmp_path: Path) -> None:
    done = run(site, "train", "sft", "--set", "task=captioner", "--set", f"run_dir={tmp_path}")
    assert done.returncode == 2
    assert "unknown task 'captioner'" in done.stderr and "style-tagger" in done.stderr
    assert "Traceback" not in done.stderr
