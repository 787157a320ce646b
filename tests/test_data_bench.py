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
    for mode in ("validate", "events"):  # both modes read the same log to the same counts
        r = report[mode]
        assert r["lines"] == 3000
        assert r["invalid"] == 30 and r["valid"] == 2970
        assert sum(r["by_type"].values()) == 2970
        assert r["lines_per_s"] > 0 and r["rss_peak_mb"] >= r["rss_baseline_mb"]
    assert report["validate"]["quarantine_bytes"] == report["events"]["quarantine_bytes"] > 0
