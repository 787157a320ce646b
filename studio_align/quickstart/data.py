"""The quickstart's data: demo requests, simulated creators' route logs, compiled records,
and the evaluation sets (the generator's held-out phrasings, unseen creators' preferred
plans, and the hand-written sets that ship with the package)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from studio_align.catalog import Catalog
from studio_align.data.compile import compile_logs
from studio_align.quickstart.config import QuickstartConfig
from studio_align.router import eval as packaged
from studio_align.router.creators import demo_creator_data, majority_plans
from studio_align.router.demo import demo_splits, write_jsonl


def prepare_data(out: Path, cfg: QuickstartConfig, catalog: Catalog) -> dict[str, Any]:
    """Write the demo data and compile the creator logs; returns paths and eval sets."""
    d = out / "data"
    n_train = cfg.n_train or cfg.sft_steps * cfg.batch_size
    splits = demo_splits(seed=cfg.seed, n_train=n_train, n_val=cfg.n_val, n_heldout=cfg.n_heldout)
    for name, rows in splits.items():
        write_jsonl(d / f"{name}.jsonl", rows)
    creators = demo_creator_data(
        seed=cfg.seed, n_train_creators=cfg.n_creators, n_eval_creators=cfg.n_eval_creators
    )
    logs = write_jsonl(d / "creator_logs.jsonl", creators["route_logs"])
    write_jsonl(d / "creators_eval.jsonl", creators["eval_preferred"])
    compiled = d / "compiled"
    if compiled.exists():
        shutil.rmtree(compiled)
    result = compile_logs([logs], compiled, seed=cfg.seed, catalog=catalog, check_images=False)
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
