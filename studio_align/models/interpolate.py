"""Weight interpolation between two checkpoints of one model (WiSE-FT, "model soup").

    interpolate_bundles(start, tuned, weight=0.5, out=DIR)
    # params = (1 - weight) * start + weight * tuned; everything else is the tuned bundle's

Why: preference tuning on creator logs moves a router towards the creators where they
disagree with the labels, and also, collaterally, where they agree (forgetting). Averaging
the tuned weights with the starting ones keeps much of the move at a fraction of the
forgetting (Wortsman et al. 2022, robust fine-tuning), with no extra training; the weight
is chosen on validation (docs/router.md).

Design choices:
- Works on the bundle files (`params.safetensors`), so any task's checkpoint in the bundle
  format can be mixed without building the model; floating-point tensors are mixed,
  integer ones (none today) are taken from the tuned bundle.
- Both bundles must hold the same tensors with the same shapes (same architecture), else
  a `CheckpointError` naming the first mismatch.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file

from studio_align.errors import CheckpointError

PARAMS = "params.safetensors"


def _load(d: Path) -> dict[str, np.ndarray]:
    try:
        return load_file(str(d / PARAMS))
    except (OSError, SafetensorError) as e:
        raise CheckpointError(f"{d / PARAMS}: cannot read ({e})") from None


def interpolate_bundles(
    start: str | Path, tuned: str | Path, *, weight: float, out: str | Path
) -> Path:
    """Write `out`: a copy of the `tuned` checkpoint directory whose parameters are
    `(1 - weight) * start + weight * tuned`. `out` may be `tuned` itself (in place)."""
    if not 0.0 <= weight <= 1.0:
        raise CheckpointError(f"interpolation weight {weight}: must be in [0, 1]")
    start, tuned, out = Path(start), Path(tuned), Path(out)
    a, b = _load(start), _load(tuned)
    if set(a) != set(b):
        raise CheckpointError(
            f"{start} and {tuned} hold different tensors: {sorted(set(a) ^ set(b))[:3]}"
        )
    mixed: dict[str, np.ndarray] = {}
    for k, vb in b.items():
        va = a[k]
        if va.shape != vb.shape:
            raise CheckpointError(f"{k}: shape {va.shape} in {start}, {vb.shape} in {tuned}")
        if np.issubdtype(vb.dtype, np.floating):
            m = (1.0 - weight) * va.astype(np.float32) + weight * vb.astype(np.float32)
            mixed[k] = m.astype(vb.dtype)
        else:
            mixed[k] = vb
    if out != tuned:
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(tuned, out)
    save_file(mixed, str(out / PARAMS))
    return out
