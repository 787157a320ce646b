"""Closed-loop HTTP load generator over loopback (run as its own process).

`concurrency` workers each hold one keep-alive connection and send the next request as
soon as the previous answer arrives, for `seconds`. A tiny HTTP/1.1 client on asyncio
streams keeps the generator's own CPU cost low, so on a 2-core machine the figures say
more about the server than about the client. Prints one JSON object.

    python bench/loadgen.py --port 8000 --concurrency 8 --seconds 10 [--sign acme:KEY]

`--sign PLATFORM:KEY` signs every request as that platform's backend (docs/serving.md,
"Authentication") for a creator, so the server verifies an HMAC per request and looks up
that creator's memory: the figure with authentication on.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import ipaddress
import json
import random
import socket
import time

REQUESTS = [
    {"text": "turn this photo into a 10 second video with music", "attachments": ["image"]},
    {"text": "把这张图做成10秒的视频并配乐", "attachments": ["image"]},
    {"text": "a watercolor poster of a fox in the snow", "attachments": []},
    {"text": "给这段视频调一个电影感的色调", "attachments": ["video"]},
    {"text": "product shot of this sneaker on a marble table", "attachments": ["image"]},
    {"text": "compose upbeat background music for a travel vlog", "attachments": []},
]


def _auth_head(sign: tuple[str, bytes] | None, body: bytes) -> str:
    if sign is None:
        return ""
    ts = str(int(time.time()))
    mac = hmac.new(sign[1], f"{ts}.POST./v1/route.".encode() + body, hashlib.sha256).hexdigest()
    return (
        f"X-Studio-Platform: {sign[0]}\r\nX-Studio-Timestamp: {ts}\r\nX-Studio-Signature: {mac}\r\n"
    )


async def _worker(
    host: str, port: int, deadline: float, lat: list[float], errors: list[str],
    bodies: list[bytes], sign: tuple[str, bytes] | None = None,
) -> None:  # fmt: skip
    reader, writer = await asyncio.open_connection(host, port)
    rng = random.Random()
    try:
        while time.perf_counter() < deadline:
            body = rng.choice(bodies)
            t0 = time.perf_counter()
            head = (
                f"POST /v1/route HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                f"{_auth_head(sign, body)}Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            writer.write(head + body)
            await writer.drain()
            status_line = await reader.readline()
            length = 0
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                k, _, v = line.decode().partition(":")
                if k.lower() == "content-length":
                    length = int(v)
            await reader.readexactly(length)
            lat.append(time.perf_counter() - t0)
            if b" 200 " not in status_line:
                errors.append(status_line.decode().strip())
    finally:
        writer.close()


async def run(
    host: str, port: int, concurrency: int, seconds: float, requests: list[dict] | None = None,
    sign: tuple[str, bytes] | None = None,
) -> dict[str, float]:  # fmt: skip
    lat: list[float] = []
    errors: list[str] = []
    reqs = requests or REQUESTS
    if sign is not None:
        reqs = [{**r, "creator": f"c{i}"} for i, r in enumerate(reqs)]
    bodies = [json.dumps(r, ensure_ascii=False).encode() for r in reqs]
    start = time.perf_counter()
    deadline = start + seconds
    await asyncio.gather(
        *(_worker(host, port, deadline, lat, errors, bodies, sign) for _ in range(concurrency))
    )
    wall = time.perf_counter() - start
    lat.sort()

    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000.0 if lat else float("nan")

    return {
        "concurrency": concurrency,
        "requests": len(lat),
        "errors": len(errors),
        "seconds": round(wall, 3),
        "rps": round(len(lat) / wall, 1),
        "p50_ms": round(pct(0.50), 2),
        "p95_ms": round(pct(0.95), 2),
        "p99_ms": round(pct(0.99), 2),
        "max_ms": round(lat[-1] * 1000.0, 2) if lat else float("nan"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument(
        "--requests", help="JSONL of /v1/route bodies to draw from [default: 6 built in]"
    )
    ap.add_argument("--sign", help="PLATFORM:KEY: sign every request as that platform")
    args = ap.parse_args()
    sign = None
    if args.sign:
        name, _, key = args.sign.partition(":")
        sign = (name, key.encode())
    reqs = None
    if args.requests:
        with open(args.requests, encoding="utf-8") as f:
            reqs = [json.loads(line) for line in f if line.strip()]
    if not ipaddress.ip_address(socket.gethostbyname(args.host)).is_loopback:
        ap.error(f"--host {args.host}: load is only ever sent to loopback addresses")
    out = asyncio.run(run(args.host, args.port, args.concurrency, args.seconds, reqs, sign))
    print(json.dumps({**out, "signed": sign is not None}))


if __name__ == "__main__":
    main()
