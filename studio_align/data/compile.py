"""Compile creator logs into training records: what each event teaches.

| event | record(s) |
|---|---|
| selection | `selection_pairs`: each chosen candidate ≻ each unchosen one |
| route, accepted | `routing_examples` (request → proposed plan) and a desirable `kto_samples` |
| route, rerouted | `route_dpo_pairs` (chosen = final, rejected = proposed) and `routing_examples` (request → final: the plan the creator preferred is a label too) |
| route, abandoned | an undesirable `kto_samples` (request + proposed plan) |
| retouch | `retouch` (behaviour cloning target; after ≻ before) |
| rating | a `kto_samples` (`kind="rating"`), up = desirable, down = undesirable |

Output layout under `out_dir`:

```
manifest.json
train/{selection_pairs,route_dpo_pairs,routing_examples,kto_samples,retouch}.jsonl
heldout/…  (same five files)
```

Design choices:

- All ten files are always written (possibly empty), so a consumer can rely on them.
- Image paths in records are **absolute and normalised** (resolved against the log
  file's directory): the records stay valid wherever the output directory is moved.
- `routing_examples` lines are exactly the labelled-example shape of docs/design.md
  (`{"request", "plan"}`), so they can serve as evaluation files as they are; the other
  records carry `event_id`, `creator` and `session` for tracing and per-creator figures.
- Splits are by (creator, session), see `split.py`.
- Streaming: one pass, records written as they are made; memory is bounded by the
  number of distinct groups (counted in the manifest), not the number of lines.
- Output is staged in a temporary directory and moved into place only on success. If
  lines are invalid and no quarantine was asked for, nothing is written and
  `InvalidLogError` is raised: no line is dropped silently.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel

from studio_align.catalog import Catalog
from studio_align.data.reader import AnyEvent, Entry, InvalidLine, LogReader, ReadSummary
from studio_align.data.records import iter_record_models
from studio_align.data.schemas import (
    EVENT_TYPES,
    RECORD_MODELS,
    RatingEvent,
    RetouchEvent,
    RouteEvent,
    SelectionEvent,
)
from studio_align.data.split import SPLITS, assign_split, group_key
from studio_align.errors import DataError
from studio_align.textfiles import read_json_object

RECORD_NAMES: tuple[str, ...] = tuple(RECORD_MODELS)
MANIFEST = "manifest.json"
FORMAT = "studio-align/compiled-logs"
FORMAT_VERSION = 1


class InvalidLogError(DataError):
    """Invalid lines were found and no quarantine was asked for; `.summary` has them."""

    def __init__(self, summary: ReadSummary) -> None:
        self.summary = summary
        first = summary.invalid[0] if summary.invalid else None
        super().__init__(
            f"{summary.invalid_count} invalid line(s)"
            + (f", first {first}" if first else "")
            + "; fix them, or set them aside with a quarantine file (`--quarantine FILE`, or "
            "`quarantine = FILE` in a run config)"
        )


@dataclass
class CompileResult:
    out_dir: Path
    manifest: dict[str, Any]
    summary: ReadSummary


def records_for(
    event: AnyEvent, image_path: Callable[[str], str]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """What one event teaches, as `(record name, record)` pairs (see the module table).

    `image_path` turns an image path as logged into the path to record (absolute).
    """
    base = {"event_id": event.id, "creator": event.creator, "session": event.session}
    if isinstance(event, SelectionEvent):
        unchosen = event.unchosen
        by_id = {c.id: c for c in event.candidates}
        for cid in event.chosen:
            good = by_id[cid]
            good_image = image_path(good.image)
            for bad in unchosen:
                yield (
                    "selection_pairs",
                    {
                        **base,
                        "prompt": event.prompt,
                        "chosen_id": good.id,
                        "chosen_image": good_image,
                        "rejected_id": bad.id,
                        "rejected_image": image_path(bad.image),
                    },
                )
    elif isinstance(event, RouteEvent):
        request = event.request.model_dump()
        if event.outcome == "rerouted":
            assert event.final is not None
            yield (
                "route_dpo_pairs",
                {
                    **base,
                    "request": request,
                    "chosen": event.final,
                    "rejected": event.proposed,
                },
            )
            yield "routing_examples", {"request": request, "plan": event.final}
        elif event.outcome == "accepted":
            yield "routing_examples", {"request": request, "plan": event.proposed}
            yield (
                "kto_samples",
                {
                    **base,
                    "kind": "route",
                    "desirable": True,
                    "request": request,
                    "plan": event.proposed,
                },
            )
        else:
            yield (
                "kto_samples",
                {
                    **base,
                    "kind": "route",
                    "desirable": False,
                    "request": request,
                    "plan": event.proposed,
                },
            )
    elif isinstance(event, RetouchEvent):
        yield (
            "retouch",
            {
                **base,
                "image": image_path(event.image),
                "before": event.before,
                "after": event.after,
            },
        )
    elif isinstance(event, RatingEvent):
        yield (
            "kto_samples",
            {
                **base,
                "kind": "rating",
                "desirable": event.label == "up",
                "prompt": event.prompt,
                "image": image_path(event.image),
            },
        )


def compile_logs(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    seed: int = 0,
    heldout_fraction: float = 0.2,
    catalog: Catalog | None = None,
    check_images: bool = True,
    quarantine: str | os.PathLike[str] | IO[bytes] | None = None,
    on_invalid: Callable[[InvalidLine], None] | None = None,
) -> CompileResult:
    """Read `paths` and write the records each valid event teaches into `out_dir`.

    Raises `InvalidLogError` (nothing written) when a line is invalid and `quarantine`
    is None; with a quarantine the invalid lines go there and the rest is compiled.
    """
    if not 0.0 <= heldout_fraction <= 1.0:
        raise DataError(f"heldout fraction must be in [0, 1], got {heldout_fraction}")
    reader = LogReader(
        paths,
        catalog=catalog,
        check_images=check_images,
        quarantine=quarantine,
        on_invalid=on_invalid,
    )
    out = Path(out_dir)
    created = not out.exists()  # a refused compile removes the folder it made
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".compile-", dir=out))
    try:
        counts = {name: Counter[str]() for name in RECORD_NAMES}
        events_by_split = {s: Counter[str]() for s in SPLITS}
        groups: dict[str, set[str]] = {s: set() for s in SPLITS}
        taught_nothing = 0
        files = {}
        for split in SPLITS:
            (staging / split).mkdir()
            for name in RECORD_NAMES:
                files[split, name] = open(  # noqa: SIM115 (closed in finally)
                    staging / split / f"{name}.jsonl", "w", encoding="utf-8", newline="\n"
                )
        try:
            entry: Entry
            for entry in reader:
                event = entry.event
                session = getattr(event, "session", None)
                split = assign_split(
                    event.creator, session, seed=seed, heldout_fraction=heldout_fraction
                )
                groups[split].add(group_key(event.creator, session))
                events_by_split[split][event.type] += 1
                n = 0
                for name, record in records_for(event, entry.image_path):
                    files[split, name].write(json.dumps(record, ensure_ascii=False) + "\n")
                    counts[name][split] += 1
                    n += 1
                taught_nothing += n == 0
        finally:
            for fh in files.values():
                fh.close()
        summary = reader.summary
        if summary.invalid_count and quarantine is None:
            raise InvalidLogError(summary)

        warnings = []
        if summary.valid and heldout_fraction > 0 and not groups["heldout"]:
            warnings.append(
                "held-out split is empty: too few (creator, session) groups for the fraction"
            )
        if summary.valid and heldout_fraction < 1 and not groups["train"]:
            warnings.append("train split is empty")
        manifest: dict[str, Any] = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "seed": seed,
            "heldout_fraction": heldout_fraction,
            "check_images": check_images,
            "image_paths": "absolute",
            "sources": [f.to_dict() | {"path": str(Path(f.path).resolve())} for f in summary.files],
            "lines": {
                "total": summary.total_lines,
                "valid": summary.valid,
                "invalid": summary.invalid_count,
                "blank": summary.blank,
            },
            "quarantine": summary.quarantine,
            "events": {t: summary.by_type.get(t, 0) for t in EVENT_TYPES},
            "events_by_split": {
                s: {t: events_by_split[s].get(t, 0) for t in EVENT_TYPES} for s in SPLITS
            },
            "events_teaching_nothing": taught_nothing,
            "groups": {s: len(groups[s]) for s in SPLITS},
            "records": {name: {s: counts[name].get(s, 0) for s in SPLITS} for name in RECORD_NAMES},
            "files": {s: {name: f"{s}/{name}.jsonl" for name in RECORD_NAMES} for s in SPLITS},
            "warnings": warnings,
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
        for split in SPLITS:
            (out / split).mkdir(exist_ok=True)
            for name in RECORD_NAMES:
                os.replace(staging / split / f"{name}.jsonl", out / split / f"{name}.jsonl")
        os.replace(staging / MANIFEST, out / MANIFEST)
        return CompileResult(out, manifest, summary)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if created and not any(out.iterdir()):
            out.rmdir()


def load_manifest(out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of a compiled directory (checks its format)."""
    path = Path(out_dir) / MANIFEST
    try:
        manifest = read_json_object(path, DataError)
    except FileNotFoundError:
        raise DataError(f"{path}: not a compiled-logs directory (no {MANIFEST})") from None
    if manifest.get("format") != FORMAT:
        raise DataError(f"{path}: format {manifest.get('format')!r}, expected {FORMAT!r}")
    return manifest


def read_records(
    out_dir: str | os.PathLike[str], name: str, split: str = "train"
) -> Iterator[BaseModel]:
    """Stream one compiled file as its record model (`RECORD_MODELS[name]`)."""
    if name not in RECORD_MODELS:
        raise DataError(f"unknown record kind {name!r}; expected one of {', '.join(RECORD_NAMES)}")
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}; expected train or heldout")
    path = Path(out_dir) / split / f"{name}.jsonl"
    if not path.is_file():
        raise DataError(f"{path}: missing (run `studio-align data compile` first)")
    yield from iter_record_models(path, RECORD_MODELS[name])  # the one validating reader
