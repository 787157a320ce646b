"""`model fit-prior`'s library function: give a saved router its plan prior (`prior.py`).

Why a separate step: the quickstart and `train router --logs` fit the prior after SFT, but
a router trained with `train sft`, or one trained on other data, has none until it is
fitted on that router's own training requests. Only `plan_prior.npz` is written; the
router's weights and calibration stay as they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from studio_align.errors import ConfigError, DataError
from studio_align.router.checkpoint import load_router_meta
from studio_align.router.data import read_examples
from studio_align.router.ensemble import is_ensemble
from studio_align.router.prior import fit_prior


def fit_checkpoint_prior(
    checkpoint: str | Path,
    train: str | Path,
    *,
    validation: str | Path | None = None,
    strength: float,
    top_k: int,
    windows: float = 0.0,
    asks: bool = False,
) -> dict[str, Any]:
    """`model fit-prior`: fit the plan prior of the router at `checkpoint` on the labelled
    `train` file (its own training requests at best), the L2 weight chosen on
    `validation` when given, and save it beside the weights; `windows` its weight against
    the plans of a long request's windows of sentences (0: none); `asks` whether only the
    windows holding the ask sentence compete. Returns what was fitted."""
    if is_ensemble(checkpoint):
        raise ConfigError(f"{checkpoint} is an ensemble: fit the prior of each member")
    if strength < 0 or top_k < 1 or windows < 0:
        raise ConfigError(
            f"--strength {strength} / --top-k {top_k} / --windows {windows}: "
            "need >= 0, >= 1 and >= 0"
        )
    rows = read_examples(train)
    if not rows:
        raise DataError(f"{train}: no labelled routing examples to fit the prior on")
    val = read_examples(validation) if validation is not None else []
    catalog = load_router_meta(checkpoint)["catalog_obj"]
    unknown = sorted({s for r in rows for s in r["plan"]} - set(catalog.names))
    if unknown:
        raise DataError(f"{train}: steps not in {checkpoint}'s catalog: {unknown}")
    prior = fit_prior(
        rows, val, catalog, strength=strength, top_k=top_k, windows=windows, asks=asks
    )
    prior.save(checkpoint)
    return {"checkpoint": str(checkpoint), "plans": len(prior.plans), "train": len(rows),
            "validation": len(val), "strength": strength, "top_k": top_k, "windows": windows,
            "asks": asks}  # fmt: skip
