"""Synthetic creator logs: valid events of all four types, for tests and benchmarks.

Not the demo data (that tells a story about creators' tastes, see `router/`); these are
schema-valid events with random content: plans drawn from the catalog's grammar so they
pass the reader's plan checks, images from a small pool of real tiny PNGs.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from studio_align.catalog import ATTACHMENT_KINDS, Catalog, default_catalog

GRADING_PARAMS: tuple[str, ...] = ("exposure", "contrast", "saturation", "temperature", "tint")
_WORDS = [
    "rainy",
    "neon",
    "street",
    "cinematic",
    "portrait",
    "golden",
    "hour",
    "anime",
    "product",
    "shot",
    "vintage",
    "film",
    "夜景",
    "配乐",
]


def image_pool(directory: str | os.PathLike[str], n: int = 8, *, size: int = 8) -> list[str]:
    """Write `n` tiny solid-colour PNGs into `directory/img/`; return their relative paths."""
    from PIL import Image

    img_dir = Path(directory) / "img"
    img_dir.mkdir(parents=True, exist_ok=True)
    names = []
    for i in range(n):
        name = f"img/p{i}.png"
        path = Path(directory) / name
        if not path.exists():
            colour = ((37 * i) % 256, (91 * i) % 256, (151 * i) % 256)
            Image.new("RGB", (size, size), colour).save(path)
        names.append(name)
    return names


def random_plan(
    rng: random.Random, catalog: Catalog, attachments: list[str], max_len: int = 3
) -> list[str]:
    """A plan that satisfies the catalog for these attachments."""
    plan: list[str] = []
    for _ in range(rng.randint(1, max_len)):
        options = [s for s in catalog.allowed_next(attachments, plan) if s not in plan]
        if not options:
            break
        plan.append(rng.choice(options))
    return plan


def make_event(
    kind: str,
    rng: random.Random,
    *,
    index: int,
    images: list[str],
    catalog: Catalog,
    creators: int = 50,
    sessions: int = 20,
) -> dict[str, Any]:
    """One valid event of type `kind` as a JSON-ready dict."""
    creator = f"c{rng.randrange(creators)}"
    base: dict[str, Any] = {
        "type": kind,
        "id": f"e{index}",
        "ts": f"2026-11-{1 + index % 28:02d}T{index % 24:02d}:{index % 60:02d}:00Z",
        "creator": creator,
    }
    prompt = " ".join(rng.choices(_WORDS, k=rng.randint(2, 6)))
    if kind == "selection":
        n = rng.randint(2, 4)
        cands = [{"id": chr(97 + i), "image": rng.choice(images)} for i in range(n)]
        chosen = [c["id"] for c in rng.sample(cands, rng.randint(1, n - 1))]
        return base | {
            "session": f"s{rng.randrange(sessions)}",
            "prompt": prompt,
            "candidates": cands,
            "chosen": chosen,
        }
    if kind == "route":
        attachments = rng.sample(ATTACHMENT_KINDS, rng.randint(0, 1))
        proposed = random_plan(rng, catalog, attachments)
        outcome = rng.choice(("accepted", "rerouted", "abandoned"))
        event = base | {
            "session": f"s{rng.randrange(sessions)}",
            "request": {"text": prompt, "attachments": attachments},
            "proposed": proposed,
            "outcome": outcome,
        }
        if outcome == "rerouted":
            final = proposed
            while final == proposed:
                final = random_plan(rng, catalog, attachments)
            event["final"] = final
        return event
    if kind == "retouch":
        params = rng.sample(GRADING_PARAMS, rng.randint(1, len(GRADING_PARAMS)))
        return base | {
            "image": rng.choice(images),
            "before": {p: 0.0 for p in params},
            "after": {p: round(rng.uniform(-1, 1), 3) for p in params},
        }
    if kind == "rating":
        return base | {
            "prompt": prompt,
            "image": rng.choice(images),
            "label": rng.choice(("up", "down")),
        }
    raise ValueError(f"unknown event type {kind!r}")


def synthetic_lines(
    n: int,
    *,
    seed: int = 0,
    images: list[str],
    catalog: Catalog | None = None,
    weights: tuple[float, float, float, float] = (0.4, 0.3, 0.15, 0.15),
    **kwargs: Any,
) -> Iterator[bytes]:
    """`n` JSONL lines (bytes, with `\\n`) of valid events in the given type mix."""
    rng = random.Random(seed)
    catalog = catalog or default_catalog()
    kinds = rng.choices(("selection", "route", "retouch", "rating"), weights=weights, k=n)
    for i, kind in enumerate(kinds):
        event = make_event(kind, rng, index=i, images=images, catalog=catalog, **kwargs)
        yield (json.dumps(event, ensure_ascii=False) + "\n").encode("utf-8")
