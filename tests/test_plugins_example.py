"""The example third-party plugin, installed for real and discovered through its entry point.

`pip install --target` puts the distribution (module + dist-info with entry_points.txt)
in a temporary directory; subprocesses get it on `sys.path` via PYTHONPATH, so
`importlib.metadata` sees it exactly as it would see a site-packages install.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "plugin-brand-safety"
CLI = "from studio_align.cli import main; main()"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src") / "plugin-brand-safety"
    shutil.copytree(
        EXAMPLE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )
    target = tmp_path_factory.mktemp("site")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
    ]
    cmd += ["--disable-pip-version-check", "--quiet", "--target", str(target), str(src)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert (target / "studio_align_brand_safety-0.1.0.dist-info" / "entry_points.txt").is_file()
    return target


def run(
    site: Path | None, *args: str, code: str = CLI, **extra_env: str
) -> subprocess.CompletedProcess[str]:
    drop = ("STUDIO_ALIGN_PLUGINS", "STUDIO_ALIGN_BLOCK_PLUGINS", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if k not in drop} | extra_env
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_installed_example_is_listed_with_entry_point_origin(site):
    done = run(site, "plugins", "list", "--json")
    assert done.returncode == 0, done.stderr
    plugins = {p["name"]: p for p in json.loads(done.stdout)}
    bs = plugins["brand_safety"]
    assert bs["origin"] == "entry point"
    assert bs["source"] == "studio-align-brand-safety 0.1.0"
    assert bs["hooks"] == ["studio_align_register_rewards"]
    assert bs["rewards"] == ["brand_safety"]
    assert plugins["routing"]["origin"] == "builtin"


def test_not_installed_means_not_listed():
    done = run(None, "plugins", "list", "--json")
    assert done.returncode == 0, done.stderr
    assert "brand_safety" not in {p["name"] for p in json.loads(done.stdout)}


def test_installed_example_can_be_blocked(site):
    done = run(site, "plugins", "list", "--json", STUDIO_ALIGN_BLOCK_PLUGINS="brand_safety")
    assert done.returncode == 0, done.stderr
    assert "brand_safety" not in {p["name"] for p in json.loads(done.stdout)}


@pytest.mark.slow  # ~8 s (an interpreter importing the CLI); the tests above run the CLI too
def test_python_dash_m_entry(site):
    code = "import runpy; runpy.run_module('studio_align.cli', run_name='__main__')"
    done = run(site, "--help", code=code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: studio-align")
    assert "plugins" in done.stdout


SCORE = """
import json
from studio_align.plugins import get_host
from studio_align.scoring import score_registered
host = get_host()
scores = score_registered(host,
    {"brand_safety": 2.0, "intent_accuracy": 1.0},
    {
        "prompts": ["rainy neon street", "a knockoff bag, NSFW edit", None, None],
        "requests": [None, {"text": "clean"}, {"text": "盗版 poster"}, None],
        "plans": [["audio.music"]] * 4,
        "gold_plans": [["audio.music"]] * 4,
    },
)
print(json.dumps({
    "plugin": host.rewards["brand_safety"].plugin,
    "per_reward": scores.per_reward["brand_safety"].tolist(),
    "total": scores.total.tolist(),
    "none_frac": scores.metrics["reward/brand_safety/none_frac"],
}))
"""


def test_installed_example_reward_scores_a_batch(site):
    done = run(site, code=SCORE)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.replace("NaN", "null"))
    assert out["plugin"] == "brand_safety"
    assert out["per_reward"] == [0.0, -2.0, -1.0, None]
    assert out["total"] == [1.0, -3.0, -1.0, 1.0]
    assert out["none_frac"] == 0.25
