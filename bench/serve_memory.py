"""Serving latency with the exemplar memory enabled (issue 14): p50/p99 at concurrency 8.

    python bench/serve_memory.py OUT/router [--exemplars 1600] [--seconds 20] [--concurrency 8]

1. Copies the router checkpoint to a temporary folder and fills its memory with
   `--exemplars` accepted / re-routed feedback events of fresh simulated creators (200 per
   creator, `Router.remember`, saved with `save_state`), as a platform's memory would be
   after that much feedback.
2. Starts the real server (`studio-align serve router`) on that copy, on a free loopback
   port, and waits until warm.
3. Drives it with `bench/loadgen.py` (closed loop, one keep-alive connection per client)
   with those creators' further requests, each naming its creator, so every request goes
   through calibration, the unfamiliarity score and the memory lookup.
Prints one JSON object: the load generator's figures, the memory's size, where the
answers came from during the timed run (`/metrics`' `studio_align_route_source`), the
server's compile counters at ready, before and after the timed run (decode traces, the
separate scoring pass's traces, every XLA program built: any change after ready is a
compile a request paid for), and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from router_memory import creator_streams  # noqa: E402
from serve import free_port, wait_healthy  # noqa: E402

from studio_align.router.router import Router  # noqa: E402


def populate(src: Path, dst: Path, n_exemplars: int) -> tuple[int, list[dict]]:
    """Copy `src` to `dst` with a memory of `n_exemplars`; returns (size, request bodies)."""
    shutil.copytree(src, dst)
    for f in ("memory.json", "memory.npz"):
        (dst / f).unlink(missing_ok=True)
    n_creators = max(1, -(-n_exemplars // 200))
    streams = creator_streams("bench", n_creators, seed=4242)
    router = Router.load(dst)
    bodies: list[dict] = []
    left = n_exemplars
    for cid, fb, test in streams:
        used = fb[: min(200, left)]
        left -= len(used)
        if used:
            router.remember(
                [e["request"] for e in used],
                [e.get("final") or e["proposed"] for e in used],
                [cid] * len(used),
            )
        bodies += [{**t["request"], "creator": cid} for t in test]
    assert router.memory is not None
    router.save_state(dst)
    return len(router.memory), bodies


def scrape(port: int) -> dict[str, float]:
    """The server's compile gauges and per-source route counters from `/metrics`."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        if name.endswith("_compiles") or name.startswith("studio_align_route_source_total"):
            out[name.removeprefix("studio_align_")] = float(value)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--exemplars", type=int, default=1600)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-wait-ms", type=float, default=2.0)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        ck = Path(tmp) / "router"
        size, bodies = populate(args.checkpoint, ck, args.exemplars)
        reqs = Path(tmp) / "requests.jsonl"
        reqs.write_text(
            "".join(json.dumps(b, ensure_ascii=False) + "\n" for b in bodies), encoding="utf-8"
        )
        port = free_port()
        cmd = [
            sys.executable, "-m", "studio_align", "serve", "router", "--checkpoint", str(ck),
            "--port", str(port), "--feedback-dir", str(Path(tmp) / "feedback"),
            "--set", f"max_wait_ms={args.max_wait_ms}", "--set", "remember_feedback=false",
        ]  # fmt: skip
        server = subprocess.Popen(cmd, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            startup = wait_healthy(port, server, timeout=900.0)
            at_ready = scrape(port)
            sources: Counter[str] = Counter()
            for b in bodies[:64]:  # what the answers look like (and one more warm pass)
                req = urllib.request.Request(
                    f"http://127.0.0.1:{port}/v1/route",
                    data=json.dumps(b).encode(),
                    headers={"Content-Type": "application/json"},
                )
                with urllib.request.urlopen(req, timeout=30) as r:
                    sources[json.load(r)["source"]] += 1
            before = scrape(port)
            load_before = os.getloadavg()
            out = subprocess.run(
                [sys.executable, str(HERE / "loadgen.py"), "--port", str(port),
                 "--concurrency", str(args.concurrency), "--seconds", str(args.seconds),
                 "--requests", str(reqs)],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
            load_after = os.getloadavg()
            after = scrape(port)
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(json.dumps({
        "checkpoint": str(args.checkpoint),
        "exemplars": size,
        "startup_seconds": round(startup, 2),
        "sources_of_64": dict(sources),
        "sources_in_run": {
            k.split('"')[1]: after[k] - before.get(k, 0.0) for k in after if "source" in k
        },
        "compiles": {
            k: [at_ready.get(k), before.get(k), after[k]] for k in after if "compiles" in k
        },
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "run": json.loads(out.stdout),
    }, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
