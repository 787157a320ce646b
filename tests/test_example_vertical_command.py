"""The example third-party vertical's own command, run through the CLI from its installed
distribution.

`examples/task-style-tagger` adds `studio-align data demo-style-tagger` through
`studio_align_register_commands` in the plugin its entry point names; nothing in
studio-align names it. `pip install --target` puts the distribution (package and
dist-info with `entry_points.txt`) in a temporary site directory that the subprocesses
get on `sys.path`, exactly as a site-packages install.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "task-style-tagger"
CLI = "from studio_align.cli import main; main(prog_name='studio-align')"


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
    env = {k: v for k, v in os.environ.items() if k not in drop}
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join((str(site), root))
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_the_example_adds_its_command_and_it_runs(site: Path, tmp_path: Path) -> None:
    helped = run(site, "data", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "demo-style-tagger" in helped.stdout
    assert "Write style-tagging demo data and its SFT run config." in helped.stdout

    out = tmp_path / "demo"
    done = run(site, "data", "demo-style-tagger", "--out", str(out), "--steps", "40")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out / "run.toml")
    run_cfg = tomllib.loads((out / "run.toml").read_text(encoding="utf-8"))
    assert run_cfg["task"] == "style-tagger" and run_cfg["train"]["steps"] == 40
    rows = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    assert len(rows) == 600 and {r["style"] for r in rows} == {
        "anime", "photo", "watercolor", "pixel", "3d"
    }  # fmt: skip

    listed = run(site, "plugins", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    plugin = {p["name"]: p for p in json.loads(listed.stdout)}["style_tagger"]
    assert plugin["origin"] == "entry point"
    assert plugin["commands"] == ["data demo-style-tagger"]


def test_the_installed_example_keeps_help_free_of_jax(site: Path) -> None:
    code = (
        "import sys\n"
        "from studio_align.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in ('jax', 'flax', 'torch') if m in sys.modules))\n"
    )
    done = run(site, code=code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
