"""A simulated creator whose taste is known, so alignment can be measured.

The creator's hidden taste is a utility over the colour statistics of an image
(`studio_align.reward_models.color_stats.color_statistics`): a sum of squared z-scores
away from preferred levels (e.g. warm, contrasty, lifted shadows) and a penalty on
clipped pixels. Noise enters through choice: picking among candidates, the creator picks
candidate i with probability softmax(u / temperature) (Gumbel-max), so the creator is
not perfectly consistent with their own utility. That inconsistency is the ceiling any
reward model can reach on the creator's held-out choices, and `consistency_ceiling`
measures it.

Logs are written in the docs/design.md format (selection and retouch events, JSON Lines,
image paths relative to the log file) with the images as PNG next to the log.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from studio_align.reward_models.color_stats import color_statistics
from studio_align.simulate.grading.scenes import make_scene
from studio_align.verticals.grading.renderer import N_PARAMS, render, vector_to_params

STYLE_REQUESTS = (
    "warm cinematic film look",
    "golden hour, soft shadows",
    "moody but warm, punchy contrast",
    "nostalgic film, lifted blacks",
    "vivid travel photo",
    "clean portrait grade",
)


@dataclass(frozen=True)
class Taste:
    """Preferred level and tolerance per colour statistic, plus a clipping penalty."""

    targets: dict[str, tuple[float, float]] = field(
        default_factory=lambda: {
            "warmth": (0.10, 0.04),
            "contrast": (0.25, 0.05),
            "shadows": (0.10, 0.04),
            "brightness": (0.52, 0.08),
            "saturation": (0.42, 0.12),
            "tint": (0.0, 0.03),
        }
    )
    clip_penalty: float = 8.0

    def utility(self, images: np.ndarray) -> np.ndarray:
        """Noiseless utility [N] of images [N, H, W, 3] (higher is better, max 0)."""
        return self.utility_of_stats(color_statistics(images))

    def utility_of_stats(self, s: dict[str, np.ndarray]) -> np.ndarray:
        """The utility from precomputed `color_statistics` (one pass over many tastes)."""
        u = np.zeros(s["brightness"].shape, dtype=np.float64)
        for key, (target, tol) in self.targets.items():
            u -= ((s[key] - target) / tol) ** 2
        u -= self.clip_penalty * (s["clip_black"] + s["clip_white"]) * 10
        return 0.5 * u


WARM_TASTE = Taste()
COOL_TASTE = Taste(
    targets={
        "warmth": (-0.06, 0.04),
        "contrast": (0.20, 0.05),
        "shadows": (0.06, 0.04),
        "brightness": (0.48, 0.08),
        "saturation": (0.30, 0.12),
        "tint": (0.0, 0.03),
    }
)


@dataclass
class SimulatedCreator:
    name: str
    taste: Taste = field(default_factory=Taste)
    temperature: float = 1.0

    def utility(self, images: np.ndarray) -> np.ndarray:
        return self.taste.utility(images)

    def choose(self, images: np.ndarray, rng: np.random.Generator) -> int:
        """Index of the picked candidate: argmax of u / temperature + Gumbel noise."""
        u = self.utility(images) / self.temperature
        return int(np.argmax(u + rng.gumbel(size=u.shape)))

    def retouch(
        self, source: np.ndarray, rng: np.random.Generator, *, tries: int = 24, scale: float = 0.5
    ) -> np.ndarray:
        """The creator's grade of `source`: the best of `tries` random grades, judged noisily."""
        cands = rng.normal(0.0, scale, size=(tries, N_PARAMS)).astype(np.float32)
        cands[0] = 0.0
        imgs = render(np.broadcast_to(source, (tries, *source.shape)), cands)
        u = self.utility(imgs) / self.temperature + rng.gumbel(size=tries)
        return np.clip(cands[int(np.argmax(u))], -1, 1)


def consistency_ceiling(
    creator: SimulatedCreator, chosen: np.ndarray, rejected: np.ndarray
) -> float:
    """Fraction of (chosen, rejected) image pairs the noiseless utility orders the same way."""
    uc, ur = creator.utility(chosen), creator.utility(rejected)
    return float(np.mean(uc > ur))


def _save(img: np.ndarray, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray((np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)).save(path)


def write_creator_logs(
    out_dir: str | Path,
    creators: list[tuple[SimulatedCreator, int, int]],
    *,
    seed: int = 0,
    size: tuple[int, int] = (64, 64),
    n_candidates: int = 4,
    candidate_scale: float = 0.45,
    events_per_session: int = 8,
) -> Path:
    """Write selection and retouch logs for `(creator, n_selections, n_retouches)` triples.

    Returns the path of `logs.jsonl`; images are written under `img/` next to it.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    t0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
    lines: list[str] = []
    k = 0
    for creator, n_sel, n_ret in creators:
        for i in range(n_sel):
            session = f"{creator.name}-s{i // events_per_session}"
            src = make_scene(rng, size)
            params = rng.normal(0.0, candidate_scale, size=(n_candidates, N_PARAMS))
            imgs = render(np.broadcast_to(src, (n_candidates, *src.shape)), params)
            pick = creator.choose(imgs, rng)
            cands = []
            for j in range(n_candidates):
                rel = f"img/{creator.name}/sel{i:05d}_{j}.png"
                _save(imgs[j], out / rel)
                cands.append({"id": f"c{j}", "image": rel})
            ev: dict[str, Any] = {
                "type": "selection",
                "id": f"e{k}",
                "ts": (t0 + timedelta(minutes=k)).isoformat().replace("+00:00", "Z"),
                "creator": creator.name,
                "session": session,
                "prompt": STYLE_REQUESTS[int(rng.integers(len(STYLE_REQUESTS)))],
                "candidates": cands,
                "chosen": [f"c{pick}"],
            }
            lines.append(json.dumps(ev))
            k += 1
        for i in range(n_ret):
            src = make_scene(rng, size)
            rel = f"img/{creator.name}/ret{i:05d}.png"
            _save(src, out / rel)
            # the creator grades the 8-bit file they see, as a real creator would
            seen = np.asarray(Image.open(out / rel), dtype=np.float32) / 255.0
            after = creator.retouch(seen, rng)
            ev = {
                "type": "retouch",
                "id": f"e{k}",
                "ts": (t0 + timedelta(minutes=k)).isoformat().replace("+00:00", "Z"),
                "creator": creator.name,
                "image": rel,
                "before": vector_to_params(np.zeros(N_PARAMS)),
                "after": vector_to_params(after),
            }
            lines.append(json.dumps(ev))
            k += 1
    log = out / "logs.jsonl"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return log
