"""Serving hardening figures (issue 13), measured on a real `studio-align serve router`.

Starts the server in a subprocess on a free loopback port with a tiny untrained router
checkpoint (or `--checkpoint DIR`), waits for it to be ready, then measures:

* `/metrics` size before and after N unique 404 paths (goal: unchanged within 1 KB);
* server RSS before and after N more mixed requests (route, feedback retries, 404,
  health, metrics; goal: growth < 5 MB), after a 1,000-request settle;
* reload refusals: a checkpoint outside the roots, one with NaN weights, a bundle
  naming a foreign class, and a public bind without a token (a second server start).

All traffic goes to 127.0.0.1; every loop is bounded. Prints one JSON object.

    python bench/serve_hardening.py [--requests 20000] [--checkpoint DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from serving_helpers import ServerProcess, free_port, make_router_checkpoint  # noqa: E402

TOKEN = "bench-admin-token-0123456789"


def _nan_copy(src: Path, dst: Path) -> Path:
    import shutil

    from safetensors.numpy import load_file, save_file

    shutil.copytree(src, dst)
    t = load_file(str(dst / "params.safetensors"))
    t = {k: (np.full_like(v, np.nan) if v.dtype.kind == "f" else v) for k, v in t.items()}
    save_file(t, str(dst / "params.safetensors"))
    return dst


def _foreign_copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    meta = json.loads((dst / "bundle.json").read_text())
    meta["model_class"] = "os.system"
    (dst / "bundle.json").write_text(json.dumps(meta))
    return dst


def _rss(pid: int) -> int:
    proc = psutil.Process(pid)
    return int(proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(True)))


def _server_pid(srv: ServerProcess) -> int:
    return int(srv.proc.pid)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--checkpoint", type=Path, default=None)
    ap.add_argument(
        "--no-warmup", action="store_true", help="skip compiling every bucket (sequential client)"
    )
    args = ap.parse_args()
    n = max(1, min(args.requests, 1_000_000))
    tmp = Path(tempfile.mkdtemp(prefix="serve-hardening-"))
    root = tmp / "roots"
    ck = args.checkpoint or make_router_checkpoint(root / "router", seed=0, version="bench")
    nan_ck = _nan_copy(ck, root / "nan-weights")
    foreign_ck = _foreign_copy(ck, root / "foreign-class")
    out: dict = {"requests": n, "load_before": os.getloadavg()}

    t0 = time.perf_counter()
    srv = ServerProcess(
        ck, tmp / "fb.jsonl", "--set", f"admin_token={TOKEN}",
        "--set", f"checkpoint_roots=[{json.dumps(str(root))}]", "--set", "max_batch=8",
        *(["--set", "warmup=false"] if args.no_warmup else []),
    )  # fmt: skip
    try:
        srv.wait_healthy(timeout=900)
        out["seconds_to_ready"] = round(time.perf_counter() - t0, 1)
        with httpx.Client(base_url=srv.url, timeout=60) as c:
            c.get("/metrics")
            c.get("/nope")
            before = len(c.get("/metrics").content)
            for i in range(n):
                c.get(f"/unique-{i}-{os.urandom(4).hex()}")
            after = len(c.get("/metrics").content)
            out["metrics_bytes"] = {"before": before, "after": after, "growth": after - before}
            _partial(out)

            req = {"text": "turn this photo into a short clip", "attachments": ["image"]}
            fb = {"id": "bench-1", "request": req, "proposed": ["wan.image_to_video"],
                  "outcome": "accepted", "creator": "c1", "session": "s1"}  # fmt: skip

            def mixed(i: int) -> int:
                k = i % 5
                if k == 0:
                    return c.post("/v1/route", json=req).status_code
                if k == 1:
                    return c.post("/v1/feedback", json=fb).status_code  # retries: written once
                if k == 2:
                    return c.get(f"/x/{i}").status_code
                if k == 3:
                    return c.get("/healthz").status_code
                return c.get("/metrics").status_code

            for i in range(1000):
                mixed(i)
            pid = _server_pid(srv)
            rss0 = _rss(pid)
            codes: dict[int, int] = {}
            t1 = time.perf_counter()
            for i in range(n):
                code = mixed(i)
                codes[code] = codes.get(code, 0) + 1
            rss1 = _rss(pid)
            out["rss_mb"] = {
                "before": round(rss0 / 2**20, 2),
                "after": round(rss1 / 2**20, 2),
                "growth": round((rss1 - rss0) / 2**20, 2),
            }
            out["mixed_status_codes"] = codes
            out["mixed_requests_per_s"] = round(n / (time.perf_counter() - t1), 1)
            _partial(out)
            lines = (tmp / "fb.jsonl").read_text().splitlines()
            out["feedback_lines_after_retries"] = len(lines)

            h = {"x-admin-token": TOKEN}
            refusals = {}
            for name, target in (
                ("outside_roots", "/etc"),
                ("outside_roots_symlink", str(_link(root / "escape", Path("/etc")))),
                ("nan_weights", str(nan_ck)),
                ("foreign_class", str(foreign_ck)),
            ):
                r = c.post("/admin/reload", json={"checkpoint": target}, headers=h)
                refusals[name] = {"status": r.status_code, "error": r.json().get("error")}
            r = c.post("/admin/reload", json={"checkpoint": str(ck)})
            refusals["no_token"] = {"status": r.status_code, "error": r.json().get("error")}
            refusals["still_serving"] = c.get("/healthz").json()
            out["reload_refusals"] = refusals
    finally:
        srv.stop()

    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("STUDIO_ALIGN_ADMIN_TOKEN", None)
    public = subprocess.run(
        [sys.executable, "-m", "studio_align", "serve", "router", "--checkpoint", str(ck),
         "--host", "0.0.0.0", "--port", str(free_port())],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    out["public_bind_without_token"] = {
        "exit_code": public.returncode,
        "stderr_last_line": (public.stderr.strip().splitlines() or [""])[-1],
    }
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=1))


def _partial(out: dict) -> None:
    """Print what is measured so far (a run cut short still leaves its figures)."""
    print("partial: " + json.dumps(out), file=sys.stderr, flush=True)


def _link(path: Path, target: Path) -> Path:
    if not path.exists():
        path.symlink_to(target)
    return path


if __name__ == "__main__":
    main()
