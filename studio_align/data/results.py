"""What reading creator logs reports: the reason codes of invalid lines, each invalid
line, per-file counts and the whole read's summary (`LogReader` fills them in)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from studio_align.data.schemas import EVENT_TYPES


class Reason(StrEnum):
    """Why a line is invalid."""

    NON_UTF8 = "non_utf8"
    BAD_JSON = "bad_json"
    WRONG_TYPE = "wrong_type"
    MISSING_FIELD = "missing_field"
    UNKNOWN_TYPE = "unknown_type"
    INVALID_VALUE = "invalid_value"
    UNKNOWN_STEP = "unknown_step"
    INVALID_PLAN = "invalid_plan"
    MISSING_IMAGE = "missing_image"
    LINE_TOO_LONG = "line_too_long"
    IMAGE_OUTSIDE_ROOT = "image_outside_root"


@dataclass(frozen=True, slots=True)
class InvalidLine:
    path: str
    line: int
    reason: Reason
    detail: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}: {self.detail}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "line": self.line,
            "reason": str(self.reason),
            "detail": self.detail,
        }


@dataclass(slots=True)
class FileCounts:
    path: str
    lines: int = 0
    valid: int = 0
    invalid: int = 0
    blank: int = 0
    incomplete_tail: int = 0  # bytes after the last newline (not read)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "lines": self.lines,
            "valid": self.valid,
            "invalid": self.invalid,
            "blank": self.blank,
            "incomplete_tail": self.incomplete_tail,
        }


@dataclass
class ReadSummary:
    """What a read saw. Filled in while iterating; complete once the reader is exhausted.

    `invalid` keeps the first `keep_invalid` invalid lines (all of them are counted,
    reported through `on_invalid` and quarantined); `invalid_not_kept` counts the rest.
    """

    total_lines: int = 0
    valid: int = 0
    blank: int = 0
    invalid_count: int = 0
    by_type: Counter[str] = field(default_factory=Counter)
    by_reason: Counter[str] = field(default_factory=Counter)
    invalid: list[InvalidLine] = field(default_factory=list)
    invalid_not_kept: int = 0
    files: list[FileCounts] = field(default_factory=list)
    quarantine: str | None = None

    @property
    def ok(self) -> bool:
        return self.invalid_count == 0

    @property
    def incomplete_tails(self) -> list[FileCounts]:
        """Files that end in a partial line (a writer may still be appending)."""
        return [f for f in self.files if f.incomplete_tail]

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_lines": self.total_lines,
            "valid": self.valid,
            "invalid": self.invalid_count,
            "blank": self.blank,
            "by_type": {t: self.by_type.get(t, 0) for t in EVENT_TYPES},
            "by_reason": {str(k): v for k, v in sorted(self.by_reason.items())},
            "invalid_lines": [x.to_dict() for x in self.invalid],
            "invalid_not_kept": self.invalid_not_kept,
            "files": [f.to_dict() for f in self.files],
            "incomplete_tail": {f.path: f.incomplete_tail for f in self.incomplete_tails},
            "quarantine": self.quarantine,
        }
