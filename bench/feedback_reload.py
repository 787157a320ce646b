"""What a server reload reads from an old feedback log, with and without rotation.

    python bench/feedback_reload.py DIR [--events 1000000] [--rotate-mb 64]

Writes `--events` signed `route` events (about 460 bytes each, 500 creators, four platforms)
twice under DIR: as one unrotated log, and as the segments `FeedbackLog` closes at
`--rotate-mb` plus the live log. Then times `Learner.build` on each, the part of a reload
that reads the log and replays the memory's bounds on it (`ExemplarMemory.survivors`),
with a router stand-in that records what it is taught instead of embedding it (embedding
costs the memory's size, the same in both). Prints the bytes read, the seconds, and the
exemplars the memory keeps.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from studio_align.serving.auth import Verifier
from studio_align.serving.feedback import route_event
from studio_align.serving.learning import Learner

PLATFORMS = ("acme", "bolt", "cine", "dune")  # each may hold at most half the memory


class Recorder:
    """The part of a router a `Learner` calls, counting what it is taught."""

    def __init__(self) -> None:
        self.memory = None
        self.taught = 0

    def remember(self, requests: Any, plans: Any, creators: Any, **_: Any) -> int:
        self.taught += len(requests)
        return len(requests)


def lines(n: int, verifier: Verifier) -> list[bytes]:
    out = []
    for i in range(n):
        event = route_event(
            request={"text": f"turn this photo of my cat into a short looping clip {i}",
                     "attachments": ["image"]},
            proposed=["wan.image_to_video"], final=["wan.image_to_video", "audio.music"],
            outcome="rerouted", creator=f"creator-{i % 500}", session=f"s-{i // 20}",
            event_id=f"evt-{i}",
        )  # fmt: skip
        sealed = verifier.seal(event, PLATFORMS[i % len(PLATFORMS)])
        out.append((json.dumps(sealed, ensure_ascii=False, separators=(",", ":")) + "\n").encode())
    return out


def write_rotated(folder: Path, data: list[bytes], rotate: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    live = folder / "route_events.jsonl"
    chunk: list[bytes] = []
    size, k = 0, 0
    for line in data:
        if size >= rotate:
            stamp = f"20261206T{k:012d}Z"  # the shape of `feedback.STAMP`
            (folder / f"route_events.{stamp}.jsonl").write_bytes(b"".join(chunk))
            chunk, size, k = [], 0, k + 1
        chunk.append(line)
        size += len(line)
    live.write_bytes(b"".join(chunk))
    return live


def timed_build(path: Path, verifier: Verifier) -> tuple[float, int]:
    router = Recorder()
    t = time.perf_counter()
    Learner(path, verifier).build(router)
    return time.perf_counter() - t, router.taught


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", type=Path)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--rotate-mb", type=float, default=64.0)
    args = ap.parse_args(argv)
    verifier = Verifier({p: p.encode() * 8 for p in PLATFORMS})
    data = lines(args.events, verifier)
    flat = args.dir / "flat" / "route_events.jsonl"
    flat.parent.mkdir(parents=True, exist_ok=True)
    flat.write_bytes(b"".join(data))
    rotated = write_rotated(args.dir / "rotated", data, int(args.rotate_mb * (1 << 20)))
    total = sum(len(x) for x in data)
    print(f"{args.events} events, {total / 2**20:.0f} MiB")
    for name, path in (("unrotated", flat), (f"rotated at {args.rotate_mb:g} MiB", rotated)):
        read = sum(p.stat().st_size for p in Learner(path, verifier).history() if p.exists())
        secs, taught = timed_build(path, verifier)
        print(f"{name:<20} reads {read / 2**20:7.0f} MiB  build {secs:6.2f} s  "
              f"exemplars kept {taught}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
