"""The health probe a model must pass before the server swaps it in.

Design choices:

* Two checks, cheapest first: every floating-point weight of the router's model is
  finite, then a few warm-up requests (every attachment kind, short and long text) route
  to finite confidences in [0, 1]. A NaN model fails the first; a model whose weights are
  finite but whose outputs overflow fails the second.
* A router without a `model` attribute (a test fake) is judged by its outputs only.
* A failed probe raises `ProbeFailed` with a short reason that names no path, so the
  admin endpoint can return it as is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

PROBE_REQUESTS: tuple[dict[str, Any], ...] = (
    {"text": "a poster of a red fox at dusk", "attachments": []},
    {"text": "turn this photo into a ten second clip with music", "attachments": ["image"]},
    {"text": "restyle this video as anime", "attachments": ["video"]},
    {"text": "add a voice-over to this track " * 8, "attachments": ["audio"]},
)


class ProbeFailed(Exception):
    """The model is unfit to serve; `str(e)` says why without naming files."""


def nonfinite_weights(model: Any) -> int:
    """How many floating-point weights of an NNX module are NaN or infinite."""
    bad = 0
    for _, var in nnx.to_flat_state(nnx.state(model)):
        value = var.get_value()
        dtype = getattr(value, "dtype", None)
        if dtype is None or not jnp.issubdtype(dtype, jnp.floating):
            continue
        bad += int(jax.device_get(jnp.sum(~jnp.isfinite(value))))
    return bad


def finite_confidences(confs: Sequence[float]) -> bool:
    return all(isinstance(c, int | float) and math.isfinite(c) and 0.0 <= c <= 1.0 for c in confs)


def probe(router: Any, sizes: Sequence[int] = (1,)) -> None:
    """Raise `ProbeFailed` unless `router` has finite weights and finite confidences."""
    model = getattr(router, "model", None)
    if isinstance(model, nnx.Module):
        bad = nonfinite_weights(model)
        if bad:
            raise ProbeFailed(f"health probe failed: {bad} non-finite weight(s)")
    size = min(sizes) if sizes else 1
    requests = list(PROBE_REQUESTS)
    for start in range(0, len(requests), size):
        chunk = requests[start : start + size]
        padded = chunk + [chunk[-1]] * (size - len(chunk))
        _, confs = router.route(padded)
        confs = [float(c) for c in np.asarray(confs, dtype=np.float64).tolist()]
        if not finite_confidences(confs):
            raise ProbeFailed("health probe failed: non-finite confidence on a warm-up request")
