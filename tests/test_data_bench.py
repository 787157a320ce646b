"""bench/ingest.py runs end to end on a small log and reports what it promises."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "ingest.py"


def test_ingest_bench_smoke():
    out = subprocess.run(
        [sys.executable, str(BENCH), "--lines", "3000", "--invalid-every", "100", "--check-images"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(out.stdout)
    assert report["lines"] == 3000
    assert report["invalid"] == 30 and report["valid"] == 2970
    assert sum(report["by_type"].values()) == 2970
    assert report["lines_per_s"] > 0 and report["rss_peak_mb"] >= report["rss_baseline_mb"]
