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

from pydantic import ValidationError

from studio_align.catalog import Catalog
from studio_align.data.reader import route_problem
from studio_align.data.schemas import EVENT_ADAPTER, RouteEvent


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
    final: list[str] | None,
    outcome: str,
    creator: str,
    session: str,
) -> dict[str, Any]:
    """Build a DESIGN.md `route` event (`final` is kept only where the outcome has one)."""
    event: dict[str, Any] = {
        "type": "route",
        "id": f"fb-{uuid.uuid4().hex}",
        "ts": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "creator": creator,
        "session": session,
        "request": {"text": request["text"], "attachments": list(request.get("attachments", []))},
        "proposed": list(proposed),
        "outcome": outcome,
    }
    if final is not None and outcome != "abandoned":
        event["final"] = list(final)
    return event


def check_route_event(event: Mapping[str, Any], catalog: Catalog) -> str | None:
    """Why `event` would be an invalid log line (None when `data validate` accepts it).

    The same schema and catalog checks as the log reader, so the feedback log never holds
    a line that the next `data compile` would refuse.
    """
    try:
        parsed = EVENT_ADAPTER.validate_json(json.dumps(event))  # exactly as the reader parses
    except ValidationError as e:
        return "; ".join(
            f"{'.'.join(str(p) for p in err['loc'][1:]) or 'event'}: {err['msg']}"
            for err in e.errors()
        )
    assert isinstance(parsed, RouteEvent)
    problem = route_problem(parsed, set(catalog.names), catalog.plan_problems)
    return None if problem is None else problem[1]
