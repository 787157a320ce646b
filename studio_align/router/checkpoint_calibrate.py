"""`model calibrate-router`'s library function: fit a saved router's calibration (or an
ensemble's temperature) on a platform's own labelled validation file, and save it beside
the checkpoint, so `serve router` abstains at the selective accuracy the platform chose.

Why a separate step: the quickstart and `train router --logs` calibrate their routers, but
a router trained with `train sft`, or one whose platform wants another target accuracy
(0.9 to route more, 0.98 for a cautious product), needs its thresholds refitted on
validation without retraining. Plans never change; only `calibration.json` (+ its
unfamiliarity model) or the ensemble's temperature is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from studio_align.errors import ConfigError, DataError
from studio_align.router.calibration import agreed_rows, fit_calibration
from studio_align.router.data import read_examples
from studio_align.router.ensemble import RouterEnsemble, is_ensemble, save_temperature
from studio_align.router.router import Router


def _labelled(path: str | Path, role: str) -> list[dict[str, Any]]:
    rows = read_examples(path)
    if not rows:
        raise DataError(f"{path}: no labelled routing examples for {role}")
    return rows


def calibrate_checkpoint(
    checkpoint: str | Path,
    validation: str | Path,
    *,
    train: str | Path | None = None,
    target: float | None = None,
    unfamiliarity_in_confidence: bool = False,
    reference: str | Path | None = None,
    batch_size: int = 128,
) -> dict[str, Any]:
    """Fit and save the calibration of the router (or ensemble) at `checkpoint` on the
    labelled `validation` file; `train` (labelled training requests, the router's own
    training file at best) fits the unfamiliarity model of a single router, `target`
    (0.95 when None) its abstain thresholds. `reference` (the SFT router a preference-tuned
    router started from) fits the thresholds only on the validation rows both routers plan
    alike (`calibration.agreed_rows`), as the quickstart calibrates its served router, so
    the tuned router is not made to abstain where it follows creators over the labels. An
    ensemble gets a temperature only, so the single-router options are refused for it
    rather than ignored. Returns what was fitted (JSON-ready)."""
    if target is not None and not 0.0 < target <= 1.0:
        raise ConfigError(f"--target: {target} is not in (0, 1]")
    ensemble = is_ensemble(checkpoint)
    options = {
        "--train": train is not None,
        "--target": target is not None,
        "--unfamiliarity-in-confidence": unfamiliarity_in_confidence,
        "--reference": reference is not None,
    }
    given = [name for name, on in options.items() if on]
    if ensemble and given:
        raise ConfigError(
            f"{', '.join(given)}: {checkpoint} is an ensemble, calibrated by its temperature "
            "only (no abstain thresholds)"
        )
    val = _labelled(validation, "validation")
    if ensemble:
        ens = RouterEnsemble.load(checkpoint)
        t = ens.fit_temperature(val, batch_size=batch_size)
        save_temperature(checkpoint, t)
        return {"checkpoint": str(checkpoint), "kind": "ensemble", "temperature": t,
                "validation": len(val)}  # fmt: skip
    if train is None:
        raise ConfigError(
            "--train: a single router's unfamiliarity model needs its training requests"
        )
    rows = _labelled(train, "the unfamiliarity model")
    router = Router.load(checkpoint)
    router.calibration = None
    if reference is not None:
        val = agreed_rows(router, Router.load(reference), val, batch_size=batch_size)
    cal = fit_calibration(
        router,
        rows,
        val,
        target=0.95 if target is None else target,
        batch_size=batch_size,
        unfamiliarity_in_confidence=unfamiliarity_in_confidence,
    )
    cal.save(checkpoint)
    return {
        "checkpoint": str(checkpoint),
        "kind": "router",
        "temperature": cal.temperature,
        "confidence_threshold": cal.confidence_threshold,
        "ood_threshold": cal.ood_threshold if np.isfinite(cal.ood_threshold) else None,
        "target_accuracy": cal.target_accuracy,
        "slope": cal.slope,
        "ood_weight": cal.ood_weight,
        "bias": cal.bias,
        **cal.fitted_on,
    }
