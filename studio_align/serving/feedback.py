"""Append-only feedback log: the `route` events the next training run learns from.

Each event is one JSON line written with a single `write(2)` on an `O_APPEND` descriptor
while holding an exclusive `flock`, so concurrent writers (threads or processes, several
server workers) never interleave or leave partial lines.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


class FeedbackLog:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def append(self, event: Mapping[str, Any]) -> None:
        line = (json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    written = os.write(fd, line)
                    if written != len(line):  # pragma: no cover - disk full or similar
                        raise OSError(f"{self.path}: short write ({written}/{len(line)} bytes)")
                    os.fsync(fd)
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


def route_event(
    *,
    request: Mapping[str, Any],
    proposed: list[str],
    final: list[str],
    outcome: str,
    creator: str,
    session: str | None,
) -> dict[str, Any]:
    """Build a DESIGN.md `route` event (an accepted route's final plan is the proposed one)."""
    if outcome == "accepted" and not final:
        final = list(proposed)
    event: dict[str, Any] = {
        "type": "route",
        "id": f"fb-{uuid.uuid4().hex}",
        "ts": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "creator": creator,
        "request": {"text": request["text"], "attachments": list(request.get("attachments", []))},
        "proposed": list(proposed),
        "final": list(final),
        "outcome": outcome,
    }
    if session is not None:
        event["session"] = session
    return event
