"""`/metrics` size before and after N unique 404 paths, in-process (real app, fake router).

The label set is the route template or "unmatched", so the exposition should not grow
with the number of distinct paths (goal: within 1 KB). No model and no socket: this
isolates the metrics code; `bench/serve_hardening.py` measures the same over loopback
on the real server.

    python bench/metrics_cardinality.py [--paths 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from serving_helpers import fake_loader
from serving_helpers import serve_config as _cfg
from test_serving_security import _ready

from studio_align.serving.app import create_app


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paths", type=int, default=20000)
    n = max(1, min(ap.parse_args().paths, 1_000_000))
    with TestClient(create_app(_cfg(Path(tempfile.mkdtemp())), loader=fake_loader)) as c:
        _ready(c)
        c.get("/metrics")
        c.get("/nope")
        before = len(c.get("/metrics").content)
        t0 = time.perf_counter()
        for i in range(n):
            c.get(f"/unique-{i}-{os.urandom(4).hex()}")
        after = len(c.get("/metrics").content)
    print(json.dumps({"unique_404_paths": n, "metrics_bytes_before": before,
                      "metrics_bytes_after": after, "growth": after - before,
                      "seconds": round(time.perf_counter() - t0, 1),
                      "load": os.getloadavg()}))  # fmt: skip


if __name__ == "__main__":
    main()
