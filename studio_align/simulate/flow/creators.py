"""Simulated creators for the flow vertical: hidden tastes over key and composition.

A taste is a utility over the `verticals.flow.composition` statistics of an image (mean
luma, contrast, clipped pixels, where the subject sits). Built-ins:

- `lumen`: high-key and centred (bright frames, subject in the middle, no blown whites);
- `noir`: moody low-key and off-centre (dark frames with contrast, subject to one side).

Choices are noisy (Gumbel-max over `u / temperature`), so a creator is not perfectly
consistent and a reward model learned from the logs is an estimate, not the utility.

`flow_taste(images, creators)` is the hidden utility as a reward; the simulators' plugin
registers it, so the product measures alignment against a judge it takes by name
(`eval flow --judge flow_taste`, `[model] options.judge`) and never imports a taste.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from studio_align.verticals.flow.composition import composition_stats


@dataclass(frozen=True)
class FlowTaste:
    """A creator: `utility(images [N, H, W, 3] in [0, 1]) -> [N]`, and choice noise."""

    name: str
    description: str
    utility_fn: Callable[[dict[str, np.ndarray]], np.ndarray]
    temperature: float = 0.1

    def utility(self, images: np.ndarray) -> np.ndarray:
        return np.asarray(self.utility_fn(composition_stats(images)), np.float64)

    def choose(self, images: np.ndarray, rng: np.random.Generator) -> int:
        u = self.utility(images) / self.temperature
        return int(np.argmax(u + rng.gumbel(size=u.shape)))


def _lumen(s: dict[str, np.ndarray]) -> np.ndarray:
    return 3.0 * s["luma"] - 2.0 * s["offcentre"] - 4.0 * s["clip_white"]


def _noir(s: dict[str, np.ndarray]) -> np.ndarray:
    off = np.minimum(s["offcentre"], 0.6)
    return -3.0 * s["luma"] + 2.0 * off + 2.0 * s["contrast"] - 4.0 * s["clip_black"]


CREATORS: dict[str, FlowTaste] = {
    "lumen": FlowTaste("lumen", "high-key, centred subject", _lumen),
    "noir": FlowTaste("noir", "moody low-key, off-centre subject", _noir),
}


def flow_taste(images: Sequence[Any], creators: Sequence[str | None]) -> list[float | None]:
    """Each image's hidden utility under the simulated creator named beside it; `None`
    where that creator has no simulated taste. Images [H, W, 3] in [0, 1]."""
    x = np.asarray(images, np.float32)
    out: list[float | None] = [None] * len(x)
    names = [str(c) if c is not None else None for c in creators]
    for name in dict.fromkeys(n for n in names if n in CREATORS):
        rows = [i for i, n in enumerate(names) if n == name]
        for i, u in zip(rows, CREATORS[name].utility(x[rows]), strict=True):
            out[i] = float(u)
    return out
