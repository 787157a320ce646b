"""`serve router` readiness: time to the first `/healthz` 503 (bound, warming) and to 200
(every bucket compiled), from a cold and from a warm XLA compilation cache.

Starts the real server (`python -m studio_align.cli serve router`) in a subprocess on a
free loopback port, polls `/healthz` every 20 ms from the moment the process is started,
and prints one JSON object. Modes, run in this order:

- `cold`: a fresh, empty `compile_cache_dir` (the default cache is `~/.cache/studio-align/xla`);
- `warm`: the same directory again, now filled by the cold start;
- `nocache`: `compile_cache_dir=""` (the persistent cache off), for comparison.

    python bench/serve_ready.py --checkpoint OUT/router [--repeats 1] [--modes cold warm nocache]
        [--set compile_cache_min_s=0]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _status(port: int) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return None


def start_once(
    checkpoint: str, cache: str, scratch: Path, timeout: float, sets: list[str]
) -> dict[str, float | str | None]:
    """One server start: seconds from spawn to the first 503 and to the first 200."""
    port = free_port()
    cmd = [
        sys.executable, "-m", "studio_align.cli", "serve", "router", "--checkpoint", checkpoint,
        "--port", str(port), "--feedback-dir", str(scratch / "feedback"),
        "--set", f"compile_cache_dir={json.dumps(cache)}",
        *(a for kv in sets for a in ("--set", kv)),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    err = scratch / f"server-{port}.err"
    t0 = time.perf_counter()
    with open(err, "wb") as fh:
        proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)
    first_503 = ready = None
    try:
        while time.perf_counter() - t0 < timeout:
            if proc.poll() is not None:
                raise SystemExit(f"server exited {proc.returncode}: {err.read_text()[-2000:]}")
            code = _status(port)
            now = time.perf_counter() - t0
            if code == 503 and first_503 is None:
                first_503 = now
            if code == 200:
                ready = now
                break
            time.sleep(0.02)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    text = err.read_text(errors="replace")
    said = re.search(r"ready in ([0-9.]+) ?s", text)
    return {
        "first_503_s": None if first_503 is None else round(first_503, 2),
        "ready_200_s": None if ready is None else round(ready, 2),
        "server_says_ready_in_s": float(said.group(1)) if said else None,
        "warming_lines": len(re.findall(r"warming up", text)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--modes", nargs="+", default=["cold", "warm", "nocache"],
                    choices=["cold", "warm", "nocache"])  # fmt: skip
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="Extra `serve router --set`, e.g. compile_cache_min_s=0")  # fmt: skip
    args = ap.parse_args()
    results: dict[str, list[dict[str, float | str | None]]] = {m: [] for m in args.modes}
    with tempfile.TemporaryDirectory(prefix="serve-ready-") as tmp:
        scratch = Path(tmp)
        for r in range(args.repeats):
            cache = scratch / f"xla-{r}"  # cold: empty; warm: what the cold start wrote
            for mode in args.modes:
                where = "" if mode == "nocache" else str(cache)
                res = start_once(args.checkpoint, where, scratch, args.timeout, args.sets)
                if mode != "nocache":
                    res["cache_files"] = sum(1 for _ in cache.rglob("*") if _.is_file())
                results[mode].append(res)
                print(mode, json.dumps(res), file=sys.stderr, flush=True)
    summary = {"checkpoint": args.checkpoint, "sets": args.sets, "results": results}
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
