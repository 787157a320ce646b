"""A router checkpoint's own file: `router.json`, beside the model bundle.

A router checkpoint is a model bundle directory (`studio_align.models.bundle`: model
config, weights, `tokenizer.json`) plus `router.json`, which holds the catalog the router
was trained for and the grammar's `max_steps`. `save_router` writes both; `Router.load`
reads the bundle and `load_router_meta`, which checks the metadata and names the file at
fault in one line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from studio_align.catalog import Catalog, Engine
from studio_align.errors import CheckpointError
from studio_align.models.bundle import save_model_bundle
from studio_align.textfiles import read_json_object

ROUTER_FILE = "router.json"


def catalog_to_json(catalog: Catalog) -> list[dict[str, Any]]:
    return [
        {"name": e.name, "needs": sorted(e.needs), "makes": e.makes, "description": e.description}
        for e in catalog.engines
    ]


def catalog_from_json(rows: Sequence[dict[str, Any]]) -> Catalog:
    return Catalog(
        [
            Engine(r["name"], frozenset(r["needs"]), r.get("makes"), r.get("description", ""))
            for r in rows
        ]
    )


def save_router_meta(
    path: str | Path, catalog: Catalog, *, max_steps: int = 3, **extra: Any
) -> Path:
    """Write `router.json` (catalog, max_steps, anything in `extra`) into a bundle dir."""
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    meta = {"format": 1, "max_steps": max_steps, "catalog": catalog_to_json(catalog), **extra}
    (p / ROUTER_FILE).write_text(json.dumps(meta, indent=1, ensure_ascii=False), encoding="utf-8")
    return p / ROUTER_FILE


def load_router_meta(path: str | Path) -> dict[str, Any]:
    f = Path(path) / ROUTER_FILE
    if not f.exists() and (Path(path) / "ensemble.json").is_file():  # `ensemble.py`'s file
        raise CheckpointError(
            f"{path}: a router ensemble, not a single router checkpoint (use one of its members, "
            "or `eval router`, which scores ensembles)"
        )
    if not f.exists():
        raise CheckpointError(f"{path}: not a router checkpoint (no {ROUTER_FILE})")
    meta = read_json_object(f, CheckpointError)
    try:
        meta["catalog_obj"] = catalog_from_json(meta["catalog"])
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{f}: invalid router metadata ({type(e).__name__}: {e})") from e
    steps = meta.get("max_steps")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise CheckpointError(f"{f}: max_steps {steps!r} is not a positive integer")
    return meta


def save_router(
    path: str | Path,
    model: Any,
    tokenizer: Any,
    catalog: Catalog,
    *,
    max_steps: int = 3,
    **extra: Any,
) -> Path:
    """Save model + tokenizer as a bundle (training's `save_model_bundle`) plus `router.json`."""

    save_model_bundle(path, model, tokenizer)
    save_router_meta(path, catalog, max_steps=max_steps, **extra)
    return Path(path)
