"""A distilled router against its teacher ensemble and one member: exact, ECE, coverage
at 95 % and requests/s at batch 1.

    python bench/router_distill.py --member M0 --ensemble ENS --student DISTILLED \
        [--examples FILE.jsonl] [--handwritten] [--json F]

Scores each checkpoint on labelled routing examples (`--examples`: a compiled
`routing_examples.jsonl`, e.g. a `data compile` held-out split) and, with
`--handwritten`, on the packaged hand-written evaluation sets (`packaged.EVAL_SETS`).
Confidences are raw (no temperature) for all three, so they compare like for like.
Requests/s at batch 1: warm routing of the set's requests one at a time (after one
untimed pass), so the ensemble's cost (a decode per member plus scoring passes) shows.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from studio_align.router import eval as packaged
from studio_align.router.ensemble import load_any_router
from studio_align.router.evaluate import evaluate_router


def batch1_rate(router: Any, requests: list[Any]) -> float:
    for r in requests:  # warm every shape bucket these requests reach
        router.route([r])
    t0 = time.perf_counter()
    for r in requests:
        router.route([r])
    return len(requests) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--member", type=Path, required=True)
    ap.add_argument("--ensemble", type=Path, required=True)
    ap.add_argument("--student", type=Path, required=True)
    ap.add_argument("--examples", type=Path)
    ap.add_argument("--handwritten", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    sets: dict[str, list[dict[str, Any]]] = {}
    if args.examples:
        lines = args.examples.read_text(encoding="utf-8").splitlines()
        sets["examples"] = [json.loads(x) for x in lines if x.strip()]
    if args.handwritten:
        sets |= {name: packaged.load(name) for name in packaged.EVAL_SETS}
    rows = []
    for name, path in (("member", args.member), ("ensemble", args.ensemble),
                       ("distilled", args.student)):  # fmt: skip
        router = load_any_router(path)
        for set_name, examples in sets.items():
            f, _, _ = evaluate_router(router, examples)
            row = {"router": name, "set": set_name, "n": len(examples),
                   "exact": round(float(f["exact_plan_accuracy"]), 4),
                   "ece": round(float(f["ece"]), 4),
                   "cov95": f.get("selective", {}).get("coverage_at_target"),
                   "req_per_s_batch1": round(batch1_rate(router, [e["request"] for e in examples]), 1)}  # fmt: skip
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
