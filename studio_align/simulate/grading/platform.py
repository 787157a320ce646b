"""Demo data shaped like a platform's: image files plus JSON Lines logs of simulated creators.

`write_platform_demo(out_dir)` writes `OUT/logs.jsonl` and `OUT/img/<creator>/...`, the
files a platform would export, so `train grading`, `eval grading` and `grade` run on
them exactly as on real logs. Each simulated creator (`creator.SimulatedCreator`) has a
hidden taste over colour statistics that their style request shifts (a "warm" request
warms the target, "moody" darkens it, ...), and logs, session by session:

- **retouch** events: a source photo and the creator's `after` grade (slider-by-slider
  adjustment under the creator's slightly noisy judgement, `StyledCreator.retouch`);
- **selection** events among `candidates` graded versions of a source photo, with the
  platform's extra fields `source` and each candidate's `grade`;
- **rating** events: thumbs up/down on one graded image (up when the creator's utility
  of it beats their utility of the ungraded source).

One extra creator, `newcomer`, has a single retouch: the case the trainer must count
and serve with the population slot rather than fail on.

Design choices: the creators' choices are computed on 64-px thumbnails (their utility is
a function of colour statistics, which barely depend on resolution); scenes are drawn at
`draw` pixels and upscaled to `size` (bilinear) before grading, so a 10,000-event,
512-px data set is written in minutes on a laptop, and every image on disk is exactly
`render(source image, grade)` of the saved source file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from studio_align.simulate.grading.creator import SimulatedCreator, Taste
from studio_align.simulate.grading.scenes import make_scene
from studio_align.verticals.grading.renderer import N_PARAMS, render, vector_to_params

THUMB = 64
STYLES = (
    "warm film look",
    "moody evening",
    "bright and airy",
    "vivid travel colour",
    "muted editorial",
    "",
)
# style word -> (statistic, shift of the creator's target)
STYLE_SHIFTS: dict[str, tuple[str, float]] = {
    "warm": ("warmth", 0.05),
    "moody": ("brightness", -0.08),
    "bright": ("brightness", 0.08),
    "vivid": ("saturation", 0.12),
    "muted": ("saturation", -0.12),
}


def _taste(**targets: tuple[float, float]) -> Taste:
    base = dict(Taste().targets)
    base.update(targets)
    return Taste(targets=base)


DEMO_TASTES: dict[str, Taste] = {
    "ana": _taste(warmth=(0.10, 0.04), contrast=(0.26, 0.05)),
    "bo": _taste(warmth=(-0.07, 0.04), saturation=(0.30, 0.10)),
    "chen": _taste(brightness=(0.40, 0.06), contrast=(0.30, 0.05), shadows=(0.04, 0.03)),
    "dara": _taste(brightness=(0.62, 0.06), contrast=(0.16, 0.05), shadows=(0.16, 0.04)),
    "eli": _taste(saturation=(0.58, 0.10), warmth=(0.04, 0.04)),
    "femi": _taste(saturation=(0.22, 0.08), shadows=(0.14, 0.04), warmth=(0.05, 0.04)),
}


@dataclass
class StyledCreator:
    """A simulated creator whose taste a style request shifts."""

    creator: SimulatedCreator

    def taste_for(self, style: str) -> Taste:
        targets = dict(self.creator.taste.targets)
        for word, (stat, shift) in STYLE_SHIFTS.items():
            if word in style.lower():
                t, tol = targets[stat]
                targets[stat] = (t + shift, tol)
        return replace(self.creator.taste, targets=targets)

    def utility(self, thumbs: np.ndarray, style: str = "") -> np.ndarray:
        return self.taste_for(style).utility(thumbs)

    def retouch(self, thumb: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A deliberate edit, slider by slider: two sweeps over the parameters, each
        setting one slider to the best of 9 positions around its current value under the
        creator's judgement (with a little noise). Similar photos get similar grades, as
        with a real retoucher, so the grades are learnable."""
        best = np.zeros(N_PARAMS, np.float32)
        steps = np.linspace(-0.6, 0.6, 9, dtype=np.float32)
        small = thumb[::2, ::2]
        for _sweep in range(2):
            for k in range(N_PARAMS):
                tries = np.repeat(best[None], len(steps), axis=0)
                tries[:, k] = np.clip(best[k] + steps, -1, 1)
                imgs = render(np.broadcast_to(small, (len(steps), *small.shape)), tries)
                u = self.utility(imgs) / (0.1 * self.creator.temperature)
                best = tries[int(np.argmax(u + rng.gumbel(size=len(steps))))]
        return best

    def noisy_best(self, thumbs: np.ndarray, style: str, rng: np.random.Generator) -> int:
        u = self.utility(thumbs, style) / self.creator.temperature
        return int(np.argmax(u + rng.gumbel(size=u.shape)))


def demo_creators(temperature: float = 1.0) -> dict[str, StyledCreator]:
    return {n: StyledCreator(SimulatedCreator(n, t, temperature)) for n, t in DEMO_TASTES.items()}


def _to_u8(img: np.ndarray) -> np.ndarray:
    return (np.clip(img, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def _thumb(img: np.ndarray) -> np.ndarray:
    pil = Image.fromarray(_to_u8(img)).resize((THUMB, THUMB), Image.Resampling.BILINEAR)
    return np.asarray(pil, np.float32) / 255.0


class _Writer:
    def __init__(self, out: Path, size: int, draw: int, fmt: str, rng: np.random.Generator):
        self.out, self.size, self.draw, self.fmt, self.rng = out, size, draw, fmt, rng
        self.lines: list[str] = []
        self.t0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
        self.k = 0

    def source(self) -> np.ndarray:
        """A scene at `size` px as the 8-bit file will hold it (float32 in [0, 1])."""
        small = make_scene(self.rng, (self.draw, self.draw))
        pil = Image.fromarray(_to_u8(small))
        if self.draw != self.size:
            pil = pil.resize((self.size, self.size), Image.Resampling.BILINEAR)
        return np.asarray(pil, np.float32) / 255.0

    def save(self, img: np.ndarray, rel: str) -> str:
        rel = f"{rel}.{self.fmt}"
        path = self.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        kw: dict[str, Any] = {"quality": 92} if self.fmt == "jpg" else {"compress_level": 1}
        Image.fromarray(_to_u8(img)).save(path, **kw)
        return rel

    def event(self, kind: str, creator: str, session: str, **fields: Any) -> None:
        ts = (self.t0 + timedelta(minutes=self.k)).isoformat().replace("+00:00", "Z")
        ev = {"type": kind, "id": f"e{self.k}", "ts": ts, "creator": creator, "session": session}
        self.lines.append(json.dumps({**ev, **fields}))
        self.k += 1


def write_platform_demo(
    out_dir: str | Path,
    *,
    retouches: int = 60,
    selections: int = 60,
    ratings: int = 20,
    creators: list[str] | None = None,
    size: int = 96,
    draw: int | None = None,
    candidates: int = 4,
    candidate_scale: float = 0.5,
    events_per_session: int = 6,
    temperature: float = 1.0,
    image_format: str = "png",
    seed: int = 0,
) -> Path:
    """Write the demo platform's files; returns `OUT/logs.jsonl`.

    `retouches`, `selections`, `ratings` are per creator; `creators` picks among
    `DEMO_TASTES` (default: all six), plus the one-event `newcomer`.
    """
    if image_format not in ("png", "jpg"):
        raise ValueError(f"image_format must be png or jpg, got {image_format!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    w = _Writer(out, size, draw or min(size, 128), image_format, rng)
    pool = demo_creators(temperature)
    names = creators or list(DEMO_TASTES)
    zero = vector_to_params(np.zeros(N_PARAMS))
    for name in names:
        sc = pool[name]
        kinds = ["retouch"] * retouches + ["selection"] * selections + ["rating"] * ratings
        order = rng.permutation(len(kinds))
        for j, idx in enumerate(order):
            kind, session = kinds[idx], f"{name}-s{j // events_per_session:04d}"
            style = STYLES[int(rng.integers(len(STYLES)))]
            src = w.source()
            rel = w.save(src, f"img/{name}/{kind}{j:05d}_src")
            if kind == "retouch":
                after = sc.retouch(_thumb(src), rng)
                w.event(
                    "retouch", name, session, image=rel, before=zero,
                    after=vector_to_params(after),
                )  # fmt: skip
                continue
            n = candidates if kind == "selection" else 1
            grades = np.clip(rng.normal(0.0, candidate_scale, (n, N_PARAMS)), -1, 1)
            grades = grades.astype(np.float32)
            imgs = render(np.broadcast_to(src, (n, *src.shape)), grades)
            thumbs = np.stack([_thumb(im) for im in imgs])
            cands = [
                {"id": f"c{i}", "image": w.save(imgs[i], f"img/{name}/{kind}{j:05d}_{i}"),
                 "grade": vector_to_params(grades[i])}
                for i in range(n)
            ]  # fmt: skip
            if kind == "selection":
                pick = sc.noisy_best(thumbs, style, rng)
                w.event(
                    "selection", name, session, prompt=style, source=rel, candidates=cands,
                    chosen=[f"c{pick}"],
                )  # fmt: skip
            else:
                u = sc.utility(np.concatenate([thumbs, _thumb(src)[None]]), style)
                up = u[0] + rng.logistic() * sc.creator.temperature > u[1]
                w.event(
                    "rating", name, session, prompt=style, image=cands[0]["image"],
                    label="up" if up else "down", grade=cands[0]["grade"],
                )  # fmt: skip
    src = w.source()
    rel = w.save(src, "img/newcomer/retouch00000_src")
    w.event(
        "retouch", "newcomer", "newcomer-s0000", image=rel, before=zero,
        after=vector_to_params(np.full(N_PARAMS, 0.1, np.float32)),
    )  # fmt: skip
    log = out / "logs.jsonl"
    log.write_text("\n".join(w.lines) + "\n", encoding="utf-8")
    return log
