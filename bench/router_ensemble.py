"""Router ensembles (`router/ensemble.py`) against their members, on validation.

    python bench/router_ensemble.py CKPT [CKPT ...] [--eval] [--heldout-seed 1] [--json F]

Each CKPT is a router checkpoint (for example the SFT routers `bench/router_colloquial.py`
trains for several seeds). Prints exact-plan accuracy (by language), step F1, ECE and the coverage at 95 % selective accuracy (by raw confidence) for
every member, their mean, and the ensemble of all of them (mean plan probability), on the
hand-written validation sets (`handwritten_val`, `handwritten_val2`, pooled as
`hw_val_all`) and the held-out-clause split. Confidences are uncalibrated for every row,
so members and ensemble compare like for like. `--eval` adds the evaluation sets (the
generator's held-out split for `--heldout-seed`, hand-written v1 and v2): for reporting a
setting chosen on validation, never for choosing. `--time` times warm routing of the
first member alone against the ensemble (run it on a quiet machine). `--calibrate` adds the
ensemble with a temperature fitted as the quickstart calibrates a router (`handwritten_val`
+ 80 generator validation requests of the quickstart's seed): `handwritten_val`'s figures
are then in-sample, `handwritten_val2`'s and the evaluation sets' are not.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from studio_align.quickstart.config import QuickstartConfig
from studio_align.router import eval as packaged
from studio_align.router.ensemble import RouterEnsemble
from studio_align.router.evaluate import evaluate_router_sets
from studio_align.router.router import Router
from studio_align.simulate.router.requests import (
    demo_splits,
    generate_examples,
    heldout_clause_examples,
)

CLAUSE_SEED = 9001  # as bench/router_colloquial.py


def sets_for(with_eval: bool, heldout_seed: int) -> dict[str, list[dict[str, Any]]]:
    v1, v2 = packaged.load("handwritten_val"), packaged.load("handwritten_val2")
    out = {"hw_val2": v2, "hw_val": v1, "hw_val_all": v1 + v2,
           "clause": heldout_clause_examples(300, seed=CLAUSE_SEED)}  # fmt: skip
    if with_eval:
        n = QuickstartConfig().n_heldout
        out |= {
            "heldout": generate_examples(n, seed=heldout_seed, split="heldout"),
            "hw_v1": packaged.load("handwritten_v1"),
            "hw_v2": packaged.load("handwritten_v2"),
        }
    return out


def figures(router: Any, sets: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
    scored = evaluate_router_sets(router, sets, batch_size=128)
    out = {}
    for name in sets:
        f = scored[name][0]
        lang = f.get("by_language", {})
        out[name] = {
            "exact": f["exact_plan_accuracy"],
            "en": lang.get("en", {}).get("exact_plan_accuracy", float("nan")),
            "zh": lang.get("zh", {}).get("exact_plan_accuracy", float("nan")),
            "f1": f["step_f1"],
            "ece": f["ece"],
            "cov95": f["selective"]["coverage_at_target"],
        }
    return out


def timing(members: list[Router], rows: list[dict[str, Any]]) -> dict[str, float]:
    """Warm routing throughput (batch 128) of the first member alone and of the ensemble."""
    requests = [e["request"] for e in rows]
    out = {}
    for name, router in (("member", members[0]), ("ensemble", RouterEnsemble(members))):
        router.route(requests, batch_size=128)  # compiles
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            router.route(requests, batch_size=128)
            times.append(time.perf_counter() - t0)
        out[name] = len(requests) / statistics.median(times)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoints", nargs="+", type=Path)
    ap.add_argument("--eval", action="store_true")
    ap.add_argument("--heldout-seed", type=int, default=1)  # the quickstart's (seed + 1)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--time", action="store_true", help="also time routing: first member vs all")
    ap.add_argument("--calibrate", action="store_true", help="also the ensemble with a temperature")
    args = ap.parse_args(argv)
    sets = sets_for(args.eval, args.heldout_seed)
    members = [Router.load(c) for c in args.checkpoints]
    rows: dict[str, dict[str, dict[str, float]]] = {}
    for c, m in zip(args.checkpoints, members, strict=True):
        m.calibration = m.memory = None  # raw confidences, as the ensemble's
        rows[str(c)] = figures(m, sets)
    rows["member mean"] = {
        s: {k: statistics.mean(rows[str(c)][s][k] for c in args.checkpoints) for k in rows[str(args.checkpoints[0])][s]}
        for s in sets
    }  # fmt: skip
    ens = RouterEnsemble(members)
    rows["ensemble"] = figures(ens, sets)
    if args.calibrate:  # as the quickstart calibrates a router: hand-written + generator val
        cfg = QuickstartConfig()
        gen_val = demo_splits(seed=cfg.seed, n_train=cfg.sft.steps * cfg.sft.batch_size, n_val=cfg.n_val,
                              n_heldout=0)["val"]  # fmt: skip
        t = ens.fit_temperature(packaged.load("handwritten_val") + gen_val[:80], batch_size=128)
        rows[f"ensemble, temperature {t:g}"] = figures(ens, sets)
    for name, by_set in rows.items():
        print(f"\n{name}")
        for s, f in by_set.items():
            cells = " ".join(f"{k} {v:.3f}" for k, v in f.items())
            print(f"  {s:>10}  {cells}", flush=True)
    if args.time:
        rows["timing"] = {"requests_per_s": timing(members, sets["hw_val_all"])}
        print("\nrouting hw_val_all, requests/s (median of 3, warm):", rows["timing"])
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
