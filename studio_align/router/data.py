"""The router's labelled data on disk: JSON Lines of `{"request": ..., "plan": [...]}`.

Reading goes through the one validating record reader (`data.records`), so a bad line
is one error naming the file and line; writing keeps non-ASCII text as is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from studio_align.catalog import Catalog
from studio_align.data.records import read_record_file


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> Path:
    """Write `rows` as JSON Lines (parent folders made); returns the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return p


def read_examples(
    path: str | Path, catalog: Catalog | None = None, *, steps_only: bool = False
) -> list[dict[str, Any]]:
    """Labelled routing examples from JSONL through the one validating record reader
    (`data.records`): a bad line raises naming file and line; with `catalog`, plans are
    checked against it (with `steps_only`, only that their steps exist)."""
    return read_record_file(path, "routing_examples", catalog=catalog, steps_only=steps_only)
