"""The router's demo platform: labelled requests, simulated creators' route logs, the
compiled records, and the evaluation sets (the generator's held-out phrasings, unseen
creators' preferred plans, the hand-written sets that ship with the package, and each
of those against the majority creator's preferred plan)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from studio_align.catalog import Catalog
from studio_align.data.compile import compile_logs
from studio_align.router import eval as packaged
from studio_align.router.data import write_jsonl
from studio_align.simulate.router.creators import demo_creator_data, majority_plans
from studio_align.simulate.router.requests import demo_splits


def simulate_platform(
    out: Path,
    catalog: Catalog,
    *,
    seed: int,
    n_train: int,
    n_val: int,
    n_heldout: int,
    n_creators: int,
    n_eval_creators: int,
) -> dict[str, Any]:
    """Write the demo data under `out/data` and compile the creator logs; returns the
    splits, the compiled directory, the evaluation sets and the record counts."""
    d = out / "data"
    splits = demo_splits(seed=seed, n_train=n_train, n_val=n_val, n_heldout=n_heldout)
    for name, rows in splits.items():
        write_jsonl(d / f"{name}.jsonl", rows)
    creators = demo_creator_data(
        seed=seed, n_train_creators=n_creators, n_eval_creators=n_eval_creators
    )
    logs = write_jsonl(d / "creator_logs.jsonl", creators["route_logs"])
    write_jsonl(d / "creators_eval.jsonl", creators["eval_preferred"])
    compiled = d / "compiled"
    if compiled.exists():
        shutil.rmtree(compiled)
    result = compile_logs([logs], compiled, seed=seed, catalog=catalog, check_images=False)
    sets = {"heldout": splits["heldout"], "creators": creators["eval_preferred"]}
    sets["handwritten"] = packaged.load("handwritten_v1")
    sets["handwritten_v2"] = packaged.load("handwritten_v2")
    # the same requests against the majority creator's preferred plan (see majority_plans)
    for name in ("heldout", "handwritten", "handwritten_v2"):
        if name in sets:
            sets[f"{name}_majority"] = majority_plans(sets[name], catalog)
    return {
        "splits": splits,
        "compiled": compiled,
        "eval_sets": sets,
        "counts": getattr(result, "counts", None) or _manifest_counts(compiled),
    }


def _manifest_counts(compiled: Path) -> dict[str, Any]:
    try:
        return json.loads((compiled / "manifest.json").read_text(encoding="utf-8")).get(
            "counts", {}
        )
    except (OSError, json.JSONDecodeError):
        return {}
