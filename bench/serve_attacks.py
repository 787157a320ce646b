"""Attacks on the served learning loop, against the real server and a real router checkpoint.

Starts `studio-align serve router` (subprocess, loopback, platform keys `acme` and
`rival`, an admin token) and measures:

1. poisoning: what unsigned posts, a rival platform's posts naming another platform's
   creator, a one-id flood and an anonymous flood of `--flood` random-id posts do to
   another creator's plan and to the population memory; and, as the control, how many
   posts the creator itself needs;
2. durability: acknowledged signed events after a SIGKILL and restart, after an admin
   reload, and with a full disk (the server runs under RLIMIT_FSIZE, so the kernel makes
   real short writes and EFBIG): counted (in the log and answered from the memory), lost,
   torn lines;
3. the reload storm: batch requests of 8 from 4 clients while reloads alternate between
   two checkpoints: batches whose answers mix model versions, and 5xx answers;
4. p50/p99 at concurrency 8 with every request signed (bench/loadgen.py --sign).

    python bench/serve_attacks.py --checkpoint OUT/router [--flood 20000] [--seconds 10]

Prints one JSON object (with the load average at the start and the end).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from studio_align.serving.auth import signed_headers  # noqa: E402

KEYS = {"acme": "acme-platform-key-0123456789abcdef", "rival": "rival-platform-key-0123456789abcd"}
TOKEN = "bench-admin-token-0123456789"
REQ = {"text": "a watercolor poster of a fox in the snow", "attachments": []}
PLANS = [
    ["ideogram.text_to_image", "audio.music"],
    ["wan.text_to_video"],
    ["ideogram.text_to_image"],
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Client:
    """One keep-alive connection; signs with a platform's key when asked."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def post(
        self, path: str, body: Any, platform: str | None = None, **headers: str
    ) -> tuple[int, Any]:
        raw = json.dumps(body).encode()
        h = {"Content-Type": "application/json", **headers}
        if platform is not None:
            h.update(signed_headers(platform, KEYS[platform].encode(), "POST", path, raw))
        for attempt in range(2):
            try:
                self.conn.request("POST", path, raw, h)
                r = self.conn.getresponse()
                data = r.read()
                return r.status, json.loads(data) if data else None
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                if attempt:
                    raise
        raise AssertionError


class Server:
    def __init__(self, tmp: Path, checkpoint: Path, *, fsize: int | None = None) -> None:
        self.port = free_port()
        cmd = [
            sys.executable, "-m", "studio_align", "serve", "router",
            "--checkpoint", str(checkpoint), "--port", str(self.port),
            "--feedback-log", str(tmp / "fb" / "route_events.jsonl"),
            "--feedback-keys", str(tmp / "keys.toml"),
            "--set", f"admin_token={TOKEN}", "--set", "batch_buckets=[1, 8]",
            "--set", "max_batch=8", "--set", "creator_feedback_burst=30",
        ]  # fmt: skip

        def limit() -> None:
            if fsize is not None:
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

        env = {**os.environ, "PYTHONUNBUFFERED": "1", "JAX_PLATFORMS": "cpu"}
        self.err = tmp / f"server-{self.port}.log"
        with open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                cmd, env=env, preexec_fn=limit, stdout=subprocess.DEVNULL, stderr=err
            )
        t0 = time.perf_counter()
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"server exited: {self.err.read_text()[-2000:]}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/healthz")
                if json.loads(c.getresponse().read()).get("status") == "ok":
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.5)
        self.startup_s = round(time.perf_counter() - t0, 1)
        self.client = Client(self.port)

    def route(
        self, creator: str | None, text: str = REQ["text"], platform: str | None = "acme"
    ) -> dict:
        body = {**REQ, "text": text, **({"creator": creator} if creator else {})}
        status, out = self.client.post("/v1/route", body, platform if creator else None)
        assert status == 200, out
        return out

    def stop(self, kill: bool = False) -> None:
        (self.proc.kill if kill else self.proc.terminate)()
        self.proc.wait(60)


def fb(creator: str, plan: list[str], text: str = REQ["text"]) -> dict:
    return {"id": f"e-{uuid.uuid4().hex}", "request": {**REQ, "text": text}, "proposed": ["ideogram.text_to_image"],
            "final": plan, "outcome": "rerouted", "creator": creator, "session": "s"}  # fmt: skip


def statuses(codes: list[int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in codes:
        out[str(c)] = out.get(str(c), 0) + 1
    return out


def log_check(path: Path, acked: set[str]) -> dict[str, int]:
    raw = path.read_bytes() if path.exists() else b""
    ids, torn = set(), 0
    for line in raw.splitlines():
        try:
            ids.add(json.loads(line)["id"])
        except (ValueError, KeyError):
            torn += 1
    torn += bool(raw) and not raw.endswith(b"\n")
    return {
        "acknowledged": len(acked),
        "in_log": len(acked & ids),
        "lost": len(acked - ids),
        "torn_lines": torn,
    }


def poisoning(srv: Server, flood: int) -> dict[str, Any]:
    c = srv.client
    base = srv.route("ana")["plan"]
    target = next(p for p in PLANS if p != base)
    out: dict[str, Any] = {"baseline_plan": base, "attack_plan": target}
    codes = [c.post("/v1/feedback", fb("ana", target))[0] for _ in range(100)]
    out["unsigned_claims_of_ana"] = {"posts": 100, "status": statuses(codes),
                                     "ana_plan_changed": srv.route("ana")["plan"] != base}  # fmt: skip
    codes = [c.post("/v1/feedback", fb("ana", target), "rival")[0] for _ in range(100)]
    out["rival_platform_claims_of_ana"] = {"posts": 100, "status": statuses(codes),
                                           "ana_plan_changed": srv.route("ana")["plan"] != base}  # fmt: skip
    anon0 = srv.route(None)["plan"]
    codes = [c.post("/v1/feedback", fb("mallory", target), "acme")[0] for _ in range(100)]
    out["one_id_flood"] = {"posts": 100, "status": statuses(codes),
                           "anonymous_plan_changed": srv.route(None)["plan"] != anon0,
                           "other_creator_plan_changed": srv.route("bo")["plan"] != base}  # fmt: skip
    t0 = time.perf_counter()
    codes = [
        c.post("/v1/feedback", fb(f"rnd-{uuid.uuid4().hex[:12]}", target))[0] for _ in range(flood)
    ]
    out["anonymous_random_id_flood"] = {
        "posts": flood, "status": statuses(codes), "seconds": round(time.perf_counter() - t0, 1),
        "anonymous_plan_changed": srv.route(None)["plan"] != anon0,
        "ana_plan_changed": srv.route("ana")["plan"] != base,
    }  # fmt: skip
    own = 0
    while srv.route("ana")["plan"] != target and own < 10:
        own += c.post("/v1/feedback", fb("ana", target), "acme")[0] == 200
    out["posts_ana_herself_needs"] = own
    return out


def post_batch(srv: Server, n: int, tag: str, acked: set[str], expect: dict[str, str]) -> list[int]:
    codes = []
    for i in range(n):
        body = fb(f"{tag}{i}", PLANS[1], text=f"turn my {tag} sketch number {i} into a short clip")
        status, ans = srv.client.post("/v1/feedback", body, "acme")
        codes.append(status)
        if status == 200 and ans["written"]:
            acked.add(body["id"])
            expect[f"{tag}{i}"] = body["request"]["text"]
    return codes


def remembered(srv: Server, expect: dict[str, str]) -> int:
    return sum(srv.route(c, text)["plan"] == PLANS[1] for c, text in expect.items())


def storm(srv: Server, a: Path, b: Path, reloads: int) -> dict[str, Any]:
    stop = threading.Event()
    mixed, fivexx, batches = [0], [0], [0]

    def caller() -> None:
        cl = Client(srv.port)
        body = {"requests": [{**REQ, "text": f"{REQ['text']} {i}"} for i in range(8)]}
        while not stop.is_set():
            status, out = cl.post("/v1/route", body)
            batches[0] += 1
            if status >= 500:
                fivexx[0] += 1
            elif status == 200 and len({r["model_version"] for r in out["results"]}) > 1:
                mixed[0] += 1

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for t in threads:
        t.start()
    cl, codes = Client(srv.port), []
    for i in range(reloads):
        codes.append(
            cl.post(
                "/admin/reload", {"checkpoint": str((a, b)[i % 2])}, **{"X-Admin-Token": TOKEN}
            )[0]
        )
    stop.set()
    for t in threads:
        t.join()
    return {
        "reloads": statuses(codes),
        "batches": batches[0],
        "mixed_batches": mixed[0],
        "5xx": fivexx[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--flood", type=int, default=20000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--reloads", type=int, default=6)
    args = ap.parse_args()
    result: dict[str, Any] = {"checkpoint": args.checkpoint, "loadavg_start": os.getloadavg()}
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        (tmp / "keys.toml").write_text(
            "[platforms]\n" + "".join(f'{k} = "{v}"\n' for k, v in KEYS.items())
        )
        a, b = tmp / "models" / "a", tmp / "models" / "b"
        for d in (a, b):
            shutil.copytree(args.checkpoint, d)
            meta = json.loads((d / "router.json").read_text())
            (d / "router.json").write_text(json.dumps({**meta, "version": d.name}))
        log = tmp / "fb" / "route_events.jsonl"
        srv = Server(tmp, a)
        result["startup_s"] = srv.startup_s
        result["poisoning"] = poisoning(srv, args.flood)
        acked: set[str] = set()
        expect: dict[str, str] = {}
        codes = post_batch(srv, 100, "k", acked, expect)
        srv.stop(kill=True)
        srv = Server(tmp, a)
        result["after_sigkill"] = {**log_check(log, acked), "status": statuses(codes),
                                   "answered_from_memory": remembered(srv, expect)}  # fmt: skip
        status, _ = srv.client.post(
            "/admin/reload", {"checkpoint": str(b)}, **{"X-Admin-Token": TOKEN}
        )
        result["after_reload"] = {**log_check(log, acked), "reload_status": status,
                                  "answered_from_memory": remembered(srv, expect)}  # fmt: skip
        result["reload_storm"] = storm(srv, a, b, args.reloads)
        out = subprocess.run(
            [sys.executable, str(HERE / "loadgen.py"), "--port", str(srv.port), "--concurrency", "8",
             "--seconds", str(args.seconds), "--sign", f"acme:{KEYS['acme']}"],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        result["signed_concurrency_8"] = {**json.loads(out.stdout), "loadavg": os.getloadavg()}
        srv.stop()
        fsize = log.stat().st_size + 16 * 1024  # room for a few dozen events, then EFBIG
        srv = Server(tmp, a, fsize=fsize)
        codes = post_batch(srv, 100, "full", acked, expect)
        result["disk_full"] = {**log_check(log, acked), "status": statuses(codes),
                               "answered_from_memory": remembered(srv, expect), "of": len(expect)}  # fmt: skip
        srv.stop()
    result["loadavg_end"] = os.getloadavg()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
