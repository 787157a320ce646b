"""Reading the small UTF-8 text and JSON files a run keeps, with the file named on failure.

Python's own errors for these name nothing: a `UnicodeDecodeError` gives a byte offset,
a `JSONDecodeError` a line and column, and neither says which of the files a command
read was at fault. Every metadata file, manifest and ledger is read through here, so a
bad one is one line that names it, raised as the caller's error class (a checkpoint's
metadata is a `CheckpointError`, a dataset's a `DataError`). A missing or unreadable
file stays the `OSError` it is, which names its path already.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from studio_align.errors import DataError, StudioAlignError


def read_text(path: str | Path, error: type[StudioAlignError] = DataError) -> str:
    """The file's text; bytes that are not UTF-8 raise `error` naming the file and offset."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{p}: not UTF-8 text (byte {e.start}: {e.reason})") from None


def read_json(path: str | Path, error: type[StudioAlignError] = DataError) -> Any:
    """The file's JSON value; text that is not UTF-8 or not JSON raises `error` naming it."""
    p = Path(path)
    text = read_text(p, error)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{p}: invalid JSON at line {e.lineno} column {e.colno} ({e.msg})") from None


def read_json_object(path: str | Path, error: type[StudioAlignError] = DataError) -> dict[str, Any]:
    """`read_json` for a file that must hold one JSON object."""
    value = read_json(path, error)
    if not isinstance(value, dict):
        raise error(f"{path}: expected a JSON object, found {type(value).__name__}")
    return value
