"""Built-in plugin of the flow vertical: task `flow`, encoder `flow-composition`, rewards
`flow_diversity` and `flow_anchor`.

- `flow`: `verticals.flow.task.FlowTask` (built on first use).
- `flow-composition`: colour statistics + key and subject-position statistics
  (`verticals.flow.creators.CompositionEncoder`); `train reward` with this encoder learns
  where a creator wants the subject, not only the colours.
- `flow_diversity(images, groups)`: each sample's mean distance to the other samples of
  its group (the rows sharing a `groups` id, which `FlowPolicy` adds) in standardised
  `flow-composition` features: a spread bonus that counters mode collapse under GRPO
  (weight it in `flow_grpo.weights`; a negative weight turns it into a penalty).
- `flow_anchor(images, colour_anchor=None)`: minus each image's colour-statistics distance
  beyond the pretraining data's typical range (`verticals.flow.guards`); keeps Flow-GRPO
  near the data the reward model was fitted on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from studio_align.hookspecs import EncoderSpec, hookimpl
from studio_align.tasks import TaskSpec
from studio_align.verticals.flow.creators import CompositionEncoder
from studio_align.verticals.flow.guards import flow_anchor

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


@hookimpl
def studio_align_register_tasks(register: Callable[..., None]) -> None:
    register(
        TaskSpec(
            "flow",
            "studio_align.verticals.flow.task:FlowTask",  # imported when built (JAX models)
            "rectified-flow image generator (Flow-GRPO, Diffusion-DPO)",
        )
    )


@hookimpl
def studio_align_register_encoders(register: Callable[..., None]) -> None:
    register(
        EncoderSpec(
            "flow-composition",
            lambda **options: CompositionEncoder(**options),
            "colour statistics + key and subject position (numpy)",
        )
    )


@hookimpl
def studio_align_register_rewards(register: Callable[..., None]) -> None:
    register(flow_diversity)
    register(flow_anchor)
