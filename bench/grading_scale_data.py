"""Write the scale data set of `train grading` (5,000 retouch + 5,000 selection events at
512 px) with the project's procedural writer, one process per shard of creators.

`write_platform_demo` is single-threaded (about 0.5 s per event at 512 px on this
machine, most of it rendering), so 10,000 events take over an hour in one process.
Each shard runs `write_platform_demo` for some of the creators, with its own seed, into
`OUT/partK/`; the shards' logs are then merged into `OUT/logs.jsonl` with image paths
made relative to `OUT` and event ids made unique. The data are exactly what the writer
produces for those creators; only the random streams differ from a one-process run.

Usage: `python bench/grading_scale_data.py --out DIR [--retouches 834 --selections 834
--size 512 --shards 3 --seed 7]` (counts per creator; 6 creators x 834 = 5,004 each).
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from studio_align.simulate.grading.platform import DEMO_TASTES, write_platform_demo


def _shard(args: tuple[str, list[str], int, int, int, int]) -> str:
    out, creators, retouches, selections, size, seed = args
    log = write_platform_demo(
        out, retouches=retouches, selections=selections, ratings=0, creators=creators,
        size=size, image_format="jpg", seed=seed,
    )  # fmt: skip
    return str(log)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--retouches", type=int, default=834)
    ap.add_argument("--selections", type=int, default=834)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    names = list(DEMO_TASTES)
    parts = [names[k :: a.shards] for k in range(a.shards)]
    jobs = [
        (str(a.out / f"part{k}"), p, a.retouches, a.selections, a.size, a.seed + k)
        for k, p in enumerate(parts)
    ]
    with ProcessPoolExecutor(a.shards) as pool:
        logs = list(pool.map(_shard, jobs))
    lines = []
    for k, log in enumerate(logs):
        for line in Path(log).read_text(encoding="utf-8").splitlines():
            ev = json.loads(line)
            if ev["creator"] == "newcomer" and k:
                continue  # every shard writes the one-event newcomer; keep one
            ev["id"] = f"p{k}-{ev['id']}"
            for key in ("image", "source"):
                if key in ev:
                    ev[key] = f"part{k}/{ev[key]}"
            for c in ev.get("candidates", []):
                c["image"] = f"part{k}/{c['image']}"
            lines.append(json.dumps(ev))
    (a.out / "logs.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(json.dumps({"logs": str(a.out / "logs.jsonl"), "events": len(lines)}))


if __name__ == "__main__":
    main()
