"""The kill-and-resume harness of the `train ppo|grpo|distill` CLI tests.

A run is killed by SIGKILL right after a checkpoint through the public
`studio_align_on_checkpoint` hook (the test plugin `tests/plugins/kill_at_step.py`,
loaded through `STUDIO_ALIGN_PLUGINS`), so the CLI and the trainer run exactly as a user
runs them; `killed_and_resumed` then runs it again and checks the result is bitwise the
uninterrupted run's (parameters and every non-timing metric).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

KILL_PLUGIN = Path(__file__).with_name("plugins") / "kill_at_step.py"
CLI = "from studio_align.cli import main; main()"
CLOCKS = ("time", "steps_per_s", "examples_per_s")  # wall-clock figures differ run to run


def train_cli(
    kind: str, sets: Mapping[str, Any], *extra: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """`studio-align train KIND --set k=v ... --json` in a subprocess; `env` on top of a
    clean environment (no plugins, no kill step inherited)."""
    args = [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    clean = ("STUDIO_ALIGN_PLUGINS", "KILL_AT_STEP")
    full_env = {k: v for k, v in os.environ.items() if k not in clean} | env
    return subprocess.run(
        [sys.executable, "-c", CLI, "train", kind, *args, *extra],
        capture_output=True, text=True, env=full_env, timeout=900,
    )  # fmt: skip


def run_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """`metrics.jsonl` without its wall-clock figures."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [
        {k: v for k, v in r.items() if not k.startswith("time/") and k not in CLOCKS} for r in rows
    ]


def killed_and_resumed(
    kind: str, ws: Path, sets: Callable[[str], Mapping[str, Any]], *, kill_at: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run `ws/whole` uninterrupted, `ws/cut` killed after the checkpoint of step
    `kill_at` and then resumed; check the two end bitwise equal (parameters, metrics) and
    return both runs' JSON results. `sets(run)` gives a run's `--set` keys."""
    whole = train_cli(kind, sets("whole"), "--json")
    assert whole.returncode == 0, whole.stderr
    killed = train_cli(kind, sets("cut"), "--json", STUDIO_ALIGN_PLUGINS=str(KILL_PLUGIN),
                       KILL_AT_STEP=str(kill_at))  # fmt: skip
    assert killed.returncode == -9, killed.stderr
    assert not (ws / "cut" / "model").exists()  # it died mid-run
    resumed = train_cli(kind, sets("cut"), "--json")
    assert resumed.returncode == 0, resumed.stderr
    a = (ws / "whole" / "model" / "params.safetensors").read_bytes()
    b = (ws / "cut" / "model" / "params.safetensors").read_bytes()
    assert a == b
    assert run_metrics(ws / "whole") == run_metrics(ws / "cut")
    return json.loads(whole.stdout), json.loads(resumed.stdout)
