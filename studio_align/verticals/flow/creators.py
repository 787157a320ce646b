"""Simulated creators for the flow vertical: hidden tastes over key and composition.

A taste is a utility over a few pixel statistics: the mean luma (key), the luma contrast,
clipped pixels, and where the subject sits (`composition_stats`: the centroid of the
saliency `|luma - border median|`, i.e. what differs from the backdrop). Built-ins:

- `lumen`: high-key and centred (bright frames, subject in the middle, no blown whites);
- `noir`: moody low-key and off-centre (dark frames with contrast, subject to one side).

Choices are noisy (Gumbel-max over `u / temperature`), so a creator is not perfectly
consistent and a reward model learned from the logs is an estimate, not the utility.
`selection_logs` shows each creator sessions of base-model candidates and writes their
picks in the docs/design.md selection format (PNG files beside the JSONL).

`CompositionEncoder` (`flow-composition`, registered by this vertical's plugin) is the
colour-statistics vector plus the composition statistics, so a Bradley-Terry head can
learn where a creator wants the subject, which colour statistics alone cannot see.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from studio_align.reward_models.color_stats import color_features, resize_batch

_LUMA = np.array([0.2126, 0.7152, 0.0722], np.float32)
COMPOSITION_NAMES = ("luma", "contrast", "cx", "cy", "offcentre", "salience",
                     *(f"grid{i}" for i in range(9)))  # fmt: skip


def composition_stats(images: np.ndarray) -> dict[str, np.ndarray]:
    """Key and subject-position statistics of images [N, H, W, 3] in [0, 1]."""
    x = np.clip(np.asarray(images, np.float32), 0.0, 1.0)
    n, h, w, _ = x.shape
    luma = x @ _LUMA
    border = np.concatenate([luma[:, 0, :], luma[:, -1, :], luma[:, :, 0], luma[:, :, -1]], axis=1)
    sal = np.abs(luma - np.median(border, axis=1)[:, None, None])
    mass = sal.sum((1, 2)) + 1e-6
    xs = (np.arange(w, dtype=np.float32) + 0.5) / w
    ys = (np.arange(h, dtype=np.float32) + 0.5) / h
    cx = (sal.sum(1) * xs).sum(1) / mass
    cy = (sal.sum(2) * ys).sum(1) / mass
    grid = luma[:, : h - h % 3, : w - w % 3].reshape(n, 3, h // 3, 3, w // 3).mean((2, 4))
    out = {
        "luma": luma.mean((1, 2)),
        "contrast": luma.std((1, 2)),
        "cx": cx,
        "cy": cy,
        "offcentre": np.abs(cx - 0.5) * 2.0,
        "salience": sal.mean((1, 2)),
        "clip_white": (luma > 0.98).mean((1, 2)),
        "clip_black": (luma < 0.02).mean((1, 2)),
    }
    for i in range(9):
        out[f"grid{i}"] = grid.reshape(n, 9)[:, i]
    return out


def composition_features(images: np.ndarray) -> np.ndarray:
    s = composition_stats(images)
    return np.stack([s[k] for k in COMPOSITION_NAMES], axis=1).astype(np.float32)


class CompositionEncoder:
    """`Encoder`: colour statistics + composition statistics, numpy only."""

    def __init__(self, size: int = 32) -> None:
        self.size = int(size)
        self.dim = len(color_features(np.zeros((1, 8, 8, 3)))[0]) + len(COMPOSITION_NAMES)
        self.identity = f"flow-composition:v1:size={self.size}"

    def encode_images(self, images: list[Any]) -> np.ndarray:
        if not images:
            return np.zeros((0, self.dim), np.float32)
        x = resize_batch(list(images), self.size)
        return np.concatenate([color_features(x), composition_features(x)], axis=1)


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


def write_png(image: np.ndarray, path: Path) -> None:
    """Image in [0, 1] [H, W, 3] as an 8-bit PNG."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.round(np.clip(image, 0, 1) * 255).astype(np.uint8)).save(path)


def selection_logs(
    out: str | Path, candidates: np.ndarray, prompts: Sequence[str],
    creators: Sequence[FlowTaste], *, seed: int = 0, sessions_per_creator: int = 6,
) -> Path:  # fmt: skip
    """Each creator picks one of every group of candidates; writes `out/selections.jsonl`.

    `candidates` [E, K, H, W, 3] in [0, 1]: K base-model samples for prompt `prompts[e]`.
    Every creator sees every group (the images are written once, under `out/img/`);
    events are spread over `sessions_per_creator` sessions per creator, so
    `train reward`'s creator/session split has sessions to hold out.
    """
    root = Path(out)
    rng = np.random.default_rng(seed)
    e_count, k = candidates.shape[:2]
    for e in range(e_count):
        for j in range(k):
            write_png(candidates[e, j], root / "img" / f"e{e:04d}_{j}.png")
    t0 = datetime(2026, 11, 1, 10, 0, tzinfo=UTC)
    lines: list[dict[str, Any]] = []
    for c in creators:
        for e in range(e_count):
            pick = c.choose(candidates[e], rng)
            ts = (t0 + timedelta(minutes=len(lines))).strftime("%Y-%m-%dT%H:%M:%SZ")
            lines.append(
                {
                    "type": "selection",
                    "id": f"{c.name}-e{e}",
                    "ts": ts,
                    "creator": c.name,
                    "session": f"{c.name}-s{e % sessions_per_creator}",
                    "prompt": prompts[e],
                    "candidates": [
                        {"id": f"c{j}", "image": f"img/e{e:04d}_{j}.png"} for j in range(k)
                    ],
                    "chosen": [f"c{pick}"],
                }
            )
    path = root / "selections.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path
