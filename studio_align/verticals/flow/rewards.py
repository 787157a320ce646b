"""The flow vertical's rewards (registered by `verticals.flow.plugin`).

- `flow_diversity(images, groups)`: each sample's mean distance to the other samples of
  its group (the rows sharing a `groups` id, which `FlowPolicy` adds) in standardised
  `flow-composition` features: a spread bonus that counters mode collapse under GRPO
  (weight it in `flow_grpo.weights`; a negative weight turns it into a penalty).
- `flow_anchor(images, colour_anchor=None)` lives in `verticals.flow.guards`: minus each
  image's colour-statistics distance beyond the pretraining data's typical range; keeps
  Flow-GRPO near the data the reward model was fitted on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from studio_align.verticals.flow.composition import CompositionEncoder

_ENCODER = CompositionEncoder()


def flow_diversity(images: Sequence[Any], groups: Sequence[int]) -> list[float]:
    """Mean distance of each sample to the rest of its group (standardised features)."""
    f = _ENCODER.encode_images(list(images))
    f = (f - f.mean(0)) / (f.std(0) + 1e-3)
    g = np.asarray(groups)
    out = np.zeros(len(f))
    for gid in np.unique(g):
        rows = np.flatnonzero(g == gid)
        if len(rows) < 2:
            continue
        d = np.sqrt(((f[rows, None] - f[None, rows]) ** 2).sum(-1))
        out[rows] = d.sum(1) / (len(rows) - 1)
    return out.tolist()
