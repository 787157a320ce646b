"""Selection rounds on the simulated flow platform: the base model's candidates are shown
to every simulated creator, who picks one per group, and the picks are written as a
platform would export them (docs/design.md's selection format, PNGs beside the JSONL).

- `selection_logs(out, candidates, prompts, creators)`: the log of given candidates;
- `collect_selections(base, out, creators, seed=)`: a whole round from a flow model's
  samples of every training tag set, in the form `verticals.flow.experiment` takes
  (its `collect` argument): the log, the candidates, each creator's picks, the conditions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from studio_align.errors import ConfigError
from studio_align.simulate.flow.creators import CREATORS, FlowTaste
from studio_align.verticals.flow.data import label, write_png
from studio_align.verticals.flow.evaluate import TRAIN_TAG_SETS, conditions, generate


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


def collect_selections(
    base: Any, out: Path, creators: Sequence[str], *, seed: int, events_per_set: int = 12,
    k: int = 4,
) -> dict[str, Any]:  # fmt: skip
    """Candidates from `base` and every named creator's picks (logs under `out`).

    `events_per_set` groups of `k` ODE samples per training tag set; returns the log
    path, the candidates [E, k, H, W, 3] in [0, 1], `picks` {creator: [E]} and the
    conditions (`verticals`, `tags`) of each event."""
    unknown = [c for c in creators if c not in CREATORS]
    if unknown:
        raise ConfigError(
            f"creators: no simulated flow creator {unknown} (known: {sorted(CREATORS)})"
        )
    tastes = [CREATORS[c] for c in creators]
    sets = [ts for ts in TRAIN_TAG_SETS for _ in range(events_per_set)]
    cand = generate(base, TRAIN_TAG_SETS, events_per_set * k, seed=10_000 + seed)
    cand = cand.reshape(len(TRAIN_TAG_SETS) * events_per_set, k, *cand.shape[2:])
    prompts = [label(v, ts) for v, ts in sets]
    log = selection_logs(out, cand, prompts, tastes, seed=seed)
    picks: dict[str, np.ndarray] = {c.name: np.zeros(len(sets), np.int64) for c in tastes}
    for line in log.read_text().splitlines():
        ev = json.loads(line)
        e = int(ev["id"].rsplit("-e", 1)[1])
        picks[ev["creator"]][e] = int(ev["chosen"][0][1:])
    verts, tags = conditions(sets)
    return {"log": log, "candidates": cand, "picks": picks, "verticals": verts, "tags": tags}
