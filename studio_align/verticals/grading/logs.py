"""A platform's grading logs: retouch, selection and rating events, split and checked.

`read_grading_logs(logs, seed=..., heldout_fraction=...)` reads creator logs with the data
layer's `LogReader` (invalid lines are reported with file and line, or quarantined) and
keeps what the grading vertical learns from:

- **retouch**: the creator's `after` grade of their own image (behaviour cloning) and
  `after ≻ before` (a preference pair over grades of the same image);
- **selection**: the creator picked among graded candidates. Besides the docs/design.md
  fields, a grading platform logs what it rendered: `"source"` (the ungraded image) on
  the event and `"grade"` (parameters) on each candidate. The event schema tolerates
  these extra fields; they are read from the line itself. With them a selection is a
  GRPO prompt, DPO pairs (chosen grade ≻ each unchosen grade of one source) and an
  evaluation case; without them it still trains the reward model (pixels only);
- **rating**: thumbs up/down on one image, for the reward model's pointwise term.

Design choices:
- The split is `data.split.assign_split` on (creator, session), as everywhere. A retouch
  or rating without a session is grouped by its creator and UTC day (`day:2026-11-01`),
  so one creator's sessionless events do not all fall on one side.
- A grade with a parameter name the renderer does not know is a data error naming the
  file, line and name (`strict = true`, the default), or is skipped and counted.
- Creators with fewer than `min_creator_events` training events are counted in
  `rare_creators`; they get no creator slot in the policy (the population slot serves
  them), since one event cannot tell a taste from noise.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any

import numpy as np

from studio_align.data.compile import InvalidLogError
from studio_align.data.reader import LogReader
from studio_align.data.schemas import RatingEvent, RetouchEvent, SelectionEvent
from studio_align.data.split import assign_split
from studio_align.errors import DataError
from studio_align.verticals.grading.renderer import params_to_vector

MAX_PROBLEMS = 20


@dataclass
class Retouch:
    creator: str
    session: str
    image: str
    before: np.ndarray
    after: np.ndarray
    split: str
    where: str


@dataclass
class Selection:
    creator: str
    session: str
    prompt: str
    images: list[str]  # candidate images
    chosen: list[int]  # indices into images
    source: str | None  # the ungraded image, if logged
    grades: np.ndarray | None  # [candidates, P], if every candidate's grade is logged
    split: str
    where: str


@dataclass
class Rating:
    creator: str
    session: str
    prompt: str
    image: str
    up: bool
    split: str
    where: str


@dataclass
class GradingLogs:
    retouches: list[Retouch] = field(default_factory=list)
    selections: list[Selection] = field(default_factory=list)
    ratings: list[Rating] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    log_summary: dict[str, Any] = field(default_factory=dict)

    def skip(self, reason: str, detail: str) -> None:
        self.skipped[reason] += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(detail)

    def creator_counts(self, split: str = "train") -> Counter[str]:
        c: Counter[str] = Counter()
        for group in (self.retouches, self.selections, self.ratings):
            c.update(e.creator for e in group if e.split == split)  # type: ignore[attr-defined]
        return c

    def images(self) -> list[str]:
        """Every image path the kept events refer to, sorted."""
        out = {r.image for r in self.retouches} | {r.image for r in self.ratings}
        for s in self.selections:
            out.update(s.images)
            if s.source is not None:
                out.add(s.source)
        return sorted(out)

    def drop_images(self, bad: dict[str, str]) -> None:
        """Remove (and count) every event that refers to an unreadable image."""

        def ok(paths: list[str], where: str) -> bool:
            hit = next((p for p in paths if p in bad), None)
            if hit is not None:
                self.skip("unreadable_image", f"{where}: {bad[hit]}")
            return hit is None

        self.retouches = [r for r in self.retouches if ok([r.image], r.where)]
        self.ratings = [r for r in self.ratings if ok([r.image], r.where)]
        self.selections = [
            s for s in self.selections if ok(s.images + ([s.source] if s.source else []), s.where)
        ]

    def summary(self) -> dict[str, Any]:
        def count(items: list[Any]) -> dict[str, int]:
            return dict(Counter(e.split for e in items))

        return {
            "retouches": count(self.retouches),
            "selections": count(self.selections),
            "graded_selections": count([s for s in self.selections if s.grades is not None]),
            "ratings": count(self.ratings),
            "skipped": dict(self.skipped),
            "problems": list(self.problems),
            "log": {k: self.log_summary.get(k) for k in ("total_lines", "valid", "invalid")},
        }


def _session(ev: Any) -> str:
    return ev.session if ev.session else f"day:{ev.ts.astimezone(UTC).date().isoformat()}"


class _RawLines:
    """The raw JSON of a log line (for the extra grading fields), one file read per log."""

    def __init__(self) -> None:
        self._files: dict[Path, list[bytes]] = {}

    def get(self, path: Path, line: int) -> dict[str, Any]:
        if path not in self._files:
            self._files = {path: path.read_bytes().split(b"\n")}
        raw = self._files[path][line - 1]
        return dict(json.loads(raw.decode("utf-8-sig")))


def _grade(values: Any, where: str) -> np.ndarray:
    if not isinstance(values, dict):
        raise DataError(f"{where}: a grade must be an object of parameter values")
    try:
        return params_to_vector(values)
    except (KeyError, TypeError, ValueError) as e:
        msg = e.args[0] if e.args else str(e)
        raise DataError(f"{where}: {msg}") from None


def read_grading_logs(
    logs: list[str],
    *,
    seed: int = 0,
    heldout_fraction: float = 0.2,
    quarantine: str | None = None,
    strict: bool = True,
) -> GradingLogs:
    """Read retouch, selection and rating events (see the module docstring)."""
    reader = LogReader(logs, quarantine=quarantine)
    out = GradingLogs()
    raw = _RawLines()
    for entry in reader:
        ev = entry.event
        where = f"{entry.path}:{entry.line}"
        if not isinstance(ev, RetouchEvent | SelectionEvent | RatingEvent):
            continue
        session = _session(ev)
        split = assign_split(ev.creator, session, seed=seed, heldout_fraction=heldout_fraction)
        try:
            if isinstance(ev, RetouchEvent):
                out.retouches.append(
                    Retouch(
                        ev.creator,
                        session,
                        entry.image_path(ev.image),
                        _grade(ev.before, f"{where}: retouch 'before'"),
                        np.clip(_grade(ev.after, f"{where}: retouch 'after'"), -1, 1),
                        split,
                        where,
                    )
                )
            elif isinstance(ev, RatingEvent):
                out.ratings.append(
                    Rating(
                        ev.creator, session, ev.prompt, entry.image_path(ev.image),
                        ev.label == "up", split, where,
                    )
                )  # fmt: skip
            else:
                out.selections.append(_selection(ev, entry, raw, session, split, where))
        except DataError as e:
            if strict:
                raise
            out.skip("invalid_grade", str(e))
    out.log_summary = reader.summary.to_dict()
    if reader.summary.invalid_count and quarantine is None:
        raise InvalidLogError(reader.summary)
    if not (out.retouches or out.selections or out.ratings):
        raise DataError(f"{', '.join(map(str, logs))}: no retouch, selection or rating events")
    return out


def _selection(
    ev: SelectionEvent, entry: Any, raw: _RawLines, session: str, split: str, where: str
) -> Selection:
    ids = [c.id for c in ev.candidates]
    line = raw.get(Path(entry.path), entry.line)
    source = line.get("source")
    if source is not None and not isinstance(source, str):
        raise DataError(f"{where}: 'source' must be an image path")
    cands = line.get("candidates") or []
    grades = None
    if cands and all(isinstance(c, dict) and "grade" in c for c in cands):
        grades = np.stack(
            [_grade(c["grade"], f"{where}: candidates[{i}].grade") for i, c in enumerate(cands)]
        )
    return Selection(
        ev.creator,
        session,
        ev.prompt,
        [entry.image_path(c.image) for c in ev.candidates],
        [ids.index(c) for c in ev.chosen],
        entry.image_path(source) if source else None,
        grades,
        split,
        where,
    )
