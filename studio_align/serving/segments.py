"""The feedback log's closed segments: their names, listing and finding them.

A full log is renamed to `<stem>.<UTC stamp><suffix>` beside it (`feedback.py`). The stamp
is the closing time, or just after the newest segment's when the clock went back, so the
names sort in the order the segments were closed and a rename never overwrites one. Readers
that were following the live log find the segment it became by its inode (`learning.py`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

STAMP = "%Y%m%dT%H%M%S%fZ"


def segments(path: Path) -> list[Path]:
    """The log's closed segments (`<stem>.<UTC stamp><suffix>` beside it), oldest first."""
    name = re.compile(re.escape(path.stem) + r"\.\d{8}T\d{12}Z" + re.escape(path.suffix) + "$")
    try:
        found = [q for q in path.parent.iterdir() if name.match(q.name)]
    except OSError:
        return []
    return sorted(found)


def next_segment_path(path: Path) -> Path:
    """The name the live log `path` takes when closed now: its closing time, or just after
    the newest segment's if the clock went back, so names always sort as segments were
    closed (and never overwrite one). Only the holder of the log's lock calls it."""
    stamp = datetime.now(UTC)
    closed = segments(path)
    if closed:
        text = closed[-1].name[len(path.stem) + 1 : len(closed[-1].name) - len(path.suffix)]
        newest = datetime.strptime(text, STAMP).replace(tzinfo=UTC)
        stamp = max(stamp, newest + timedelta(microseconds=1))
    return path.with_name(f"{path.stem}.{stamp.strftime(STAMP)}{path.suffix}")


def segment_with_inode(path: Path, inode: int) -> Path | None:
    """The closed segment of `path` that is the file `inode` (newest first), if any."""
    for q in reversed(segments(path)):
        try:
            if q.stat(follow_symlinks=False).st_ino == inode:
                return q
        except OSError:
            continue
    return None
