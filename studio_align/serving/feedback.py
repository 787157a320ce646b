"""Append-only feedback log: the `route` events the next training run learns from.

Each event is one JSON line written with a single `write(2)` on an `O_APPEND` descriptor
while holding an exclusive `flock`, so concurrent writers (threads or processes, several
server workers) never interleave or leave partial lines.

Retry-safe: the event id is the idempotency key. `append` returns False, writing
nothing, when the id is already in the log. Under the lock it first reads whatever other
writers appended since its last look (from a remembered offset), so the check holds
across processes and costs only the new bytes. The ids seen are kept in memory (one
short string per event, the price of never writing an event twice); the same id with a
different body is a `DuplicateEventError`, so a client bug is not silently absorbed.
"""

from __future__ import annotations

import fcntl
import hashlib
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


class DuplicateEventError(ValueError):
    """An event id already in the log was posted again with a different body."""


def _digest(event: Mapping[str, Any]) -> str:
    """What identifies an event's content (not its timestamp, which a retry changes)."""
    body = {k: v for k, v in event.items() if k not in ("ts",)}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


class FeedbackLog:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._seen: dict[str, str] = {}  # event id -> content digest
        self._offset = 0

    def _catch_up(self, fd: int) -> None:
        """Read the complete lines appended since the last look and remember their ids."""
        size = os.fstat(fd).st_size
        if size < self._offset:  # truncated or replaced: read it all again
            self._seen.clear()
            self._offset = 0
        if size == self._offset:
            return
        with open(fd, "rb", closefd=False) as f:
            f.seek(self._offset)
            data = f.read(size - self._offset)
        end = data.rfind(b"\n") + 1  # a torn tail is re-read next time
        for line in data[:end].splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and isinstance(event.get("id"), str):
                self._seen.setdefault(event["id"], _digest(event))
        self._offset += end

    def append(self, event: Mapping[str, Any]) -> bool:
        """Write `event` unless its id is already logged; True when it was written."""
        line = (json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        event_id, digest = str(event["id"]), _digest(event)
        with self._lock:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    self._catch_up(fd)
                    known = self._seen.get(event_id)
                    if known is not None:
                        if known != digest:
                            raise DuplicateEventError(
                                f"event id {event_id!r} was already used for a different event"
                            )
                        return False
                    written = os.write(fd, line)
                    if written != len(line):  # pragma: no cover - disk full or similar
                        raise OSError(f"{self.path}: short write ({written}/{len(line)} bytes)")
                    os.fsync(fd)
                    self._offset = os.fstat(fd).st_size
                    self._seen[event_id] = digest
                    return True
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
    event_id: str | None = None,
) -> dict[str, Any]:
    """Build a docs/design.md `route` event (`final` is kept only where the outcome has one)."""
    event: dict[str, Any] = {
        "type": "route",
        "id": event_id or f"fb-{uuid.uuid4().hex}",
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
