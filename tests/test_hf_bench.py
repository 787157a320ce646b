"""Smoke run of bench/base_model.py on the tiny preset (the real run is by hand)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "base_model.py"


@pytest.mark.slow  # compiles SFT, sampler and GRPO update: ~25 s of CPU
def test_base_model_bench_smoke() -> None:
    r = subprocess.run(
        [sys.executable, str(BENCH), "--preset", "tiny", "--batch", "2", "--seq", "16",
         "--steps", "1", "--prompts", "2", "--group", "2", "--new-tokens", "4", "--grpo-steps", "2"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["lora_sft"]["step_s"] > 0 and out["grpo_lora"]["samples_per_step"] == 4
    assert out["hf_round_trip"]["load_s"] > 0 and out["peak_rss_mb"] > 0
