"""Serving benchmark: p50/p99 latency and requests/s at several concurrencies.

Starts `studio-align serve router` in a subprocess on a free loopback port, waits for
it to warm up, then drives it from a separate load-generator process (bench/loadgen.py)
at each concurrency for a bounded time. Prints one JSON object.

    python bench/serve.py --checkpoint OUT/router [--seconds 10] [--concurrency 1 8 64]

Targets (2-core machine, default router): p99 <= 50 ms at concurrency 8,
>= 300 requests/s at concurrency 64.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(port: int, proc: subprocess.Popen[bytes], timeout: float = 300.0) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with code {proc.returncode} before becoming healthy")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                if json.load(r).get("status") == "ok":
                    return time.perf_counter() - start
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("server did not become healthy in time")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--checkpoint", required=True, help="router checkpoint dir (quickstart leaves OUT/router)"
    )
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 64])
    ap.add_argument("--max-wait-ms", type=float, default=2.0)
    args = ap.parse_args()

    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable, "-m", "studio_align", "serve", "router",
            "--checkpoint", args.checkpoint, "--port", str(port),
            "--feedback-log", str(Path(tmp) / "feedback.jsonl"),
            "--set", f"max_wait_ms={args.max_wait_ms}",
        ]  # fmt: skip
        server = subprocess.Popen(cmd, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            startup = wait_healthy(port, server)
            results = []
            for c in args.concurrency:
                out = subprocess.run(
                    [sys.executable, str(HERE / "loadgen.py"), "--port", str(port),
                     "--concurrency", str(c), "--seconds", str(args.seconds)],
                    check=True, capture_output=True, text=True,
                )  # fmt: skip
                results.append(json.loads(out.stdout))
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                metrics = r.read().decode()
        finally:
            server.terminate()
            server.wait(timeout=30)
    batch_lines = [ln for ln in metrics.splitlines() if ln.startswith("studio_align_batch_size_")]
    count = float(
        next(ln.split()[-1] for ln in batch_lines if ln.startswith("studio_align_batch_size_count"))
    )
    total = float(
        next(ln.split()[-1] for ln in batch_lines if ln.startswith("studio_align_batch_size_sum"))
    )
    print(json.dumps({
        "checkpoint": args.checkpoint,
        "startup_seconds": round(startup, 2),
        "mean_batch_size": round(total / max(count, 1), 2),
        "runs": results,
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
