"""Memory curve (issue 14): agreement with a simulated creator against the number of that
creator's feedback events, with no training.

    python bench/router_memory.py OUT/router [--events 0 10 50 200] [--key sentence|plan_state] [--json F]

For each simulated creator (fresh ones, drawn from the demo population of tastes, writing
with the generator's held-out phrasings): the first N of its route events that were
accepted or re-routed become exemplars (`Router.remember`, the creator's final plan), and
agreement is the exact-plan match with the creator's own preferred plan on 60 further
requests of that creator. The memory's similarity threshold is chosen on separate
validation creators (at N = 50), never on the reported ones. `--key` picks what the
memory compares (`Router.memory_keys`; default: the router's own).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from studio_align.router.memory import ExemplarMemory
from studio_align.router.router import Router
from studio_align.simulate.router.creators import SimConfig, make_creators, simulate_route_logs

GRID = (0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.98)


def creator_streams(prefix: str, n: int, seed: int) -> list[tuple[str, list[dict], list[dict]]]:
    """(creator id, feedback events, test examples) per creator."""
    out = []
    for c in make_creators(n, seed=seed, prefix=prefix):
        cfg = SimConfig(split="heldout", sessions_per_creator=30, requests_per_session=8)
        events, _ = simulate_route_logs([c], seed=seed, config=cfg)
        test_cfg = SimConfig(split="heldout", sessions_per_creator=6, requests_per_session=10)
        _, test = simulate_route_logs([c], seed=seed + 1000, config=test_cfg)
        fb = [e for e in events if e["outcome"] in ("accepted", "rerouted")]
        out.append((c.id, fb, test[:60]))
    return out


def agreement(router: Router, streams: list, n_events: int, sim: float) -> float:
    hits, total = 0, 0
    for cid, fb, test in streams:
        router.memory = ExemplarMemory(creator_sim=sim)
        used = fb[:n_events]
        if used:
            router.remember(
                [e["request"] for e in used],
                [e.get("final") or e["proposed"] for e in used],
                [cid] * len(used),
            )
        ds = router.decide([t["request"] for t in test], creators=[cid] * len(test))
        hits += sum(d["plan"] == t["plan"] for d, t in zip(ds, test, strict=True))
        total += len(test)
    router.memory = None
    return hits / total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--events", type=int, nargs="+", default=[0, 10, 50, 200])
    ap.add_argument("--creators", type=int, default=8)
    ap.add_argument("--key", choices=["sentence", "plan_state"], default=None)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    router = Router.load(args.checkpoint)
    router.memory = None
    if args.key is not None:
        router.memory_key = args.key
    print("memory key:", router.memory_key)
    val = creator_streams("mv", args.creators, seed=7)
    val_scores = {s: agreement(router, val, 50, s) for s in GRID}
    best = max(GRID, key=lambda s: (val_scores[s], -s))
    print("validation creators, 50 events:", {k: round(v, 3) for k, v in val_scores.items()})
    print("chosen creator_sim:", best)
    test = creator_streams("mt", args.creators, seed=11)
    curve = {n: agreement(router, test, n, best) for n in args.events}
    for n, a in curve.items():
        print(f"events {n:>4}: agreement {a:.3f}")
    # latency of one decision with a full memory (200 exemplars per creator, 8 creators)
    router.memory = ExemplarMemory(creator_sim=best)
    for cid, fb, _ in test:
        router.remember(
            [e["request"] for e in fb[:200]],
            [e.get("final") or e["proposed"] for e in fb[:200]],
            [cid] * len(fb[:200]),
        )
    req = [test[0][2][0]["request"]]
    router.decide(req, creators=[test[0][0]])
    lat = []
    for _ in range(50):
        t0 = time.perf_counter()
        router.decide(req, creators=[test[0][0]])
        lat.append(time.perf_counter() - t0)
    p50, p99 = np.percentile(lat, 50) * 1e3, np.percentile(lat, 99) * 1e3
    print(
        f"decide() with {len(router.memory)} exemplars, batch 1: p50 {p50:.1f} ms, p99 {p99:.1f} ms"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "validation": val_scores,
                    "creator_sim": best,
                    "key": router.memory_key,
                    "curve": curve,
                    "latency_ms": {"p50": p50, "p99": p99},
                },
                indent=1,
            ),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
