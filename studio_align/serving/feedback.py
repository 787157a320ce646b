"""Append-only feedback log: the `route` events the next training run learns from.

Each event is one JSON line written with a single `write(2)` on an `O_APPEND` descriptor
while holding an exclusive `flock`, so concurrent writers (threads or processes, several
server workers) never interleave or leave partial lines.

Retry-safe: the event id, within the platform that sealed it (`auth.platform`; unsealed
events share one namespace), is the idempotency key, so one platform can neither squat
another's ids nor learn from a 409 what another logged. `append` returns False, writing
nothing, when the id is already in the log. Under the lock it first reads whatever other
writers appended since its last look (from a remembered offset), so the check holds
across processes and costs only the new bytes. The ids seen are kept in memory (one
short string per event, the price of never writing an event twice); the same id with a
different body is a `DuplicateEventError`, so a client bug is not silently absorbed.

Never torn: an event is acknowledged only after its whole line is written and fsync-ed.
A short or failed write (a full disk, a quota) is rolled back by truncating the file to
its size before the write, and raised as `LogWriteError` (the server answers 507 or 503),
so the next event starts on a clean line. A tail without a newline that a crashed writer
left behind (never acknowledged) is moved to `<log>.torn` before the next write.
The log must be a regular file (`check_log_path`): a FIFO, a device or a dangling link is
refused at start, and re-checked on every open.

Bounded: once the log holds `rotate_bytes`, the writer that finds it so renames it to a
closed segment `<stem>.<UTC stamp><suffix>` beside it (`route_events.20261206T101500123456Z.jsonl`)
and starts a new one; nothing is deleted, and a folder given to `train router --logs` or
`data compile` reads every segment. Each writer holds the lock of the file it opened and
checks, once it has the lock, that the file is still the log (not a segment another writer
closed meanwhile), so every line lands in the live log. The ids of the active log and of
the newest closed segment are remembered, so a retry is caught across one rotation; the
memory that keeps costs one short string per event of at most two segments.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import stat
import threading
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from studio_align.catalog import Catalog
from studio_align.data.reader import route_problem
from studio_align.data.schemas import EVENT_ADAPTER, RouteEvent
from studio_align.errors import ConfigError
from studio_align.serving.segments import next_segment_path, segment_with_inode, segments

log = logging.getLogger("studio_align.serving")
Writer = Callable[[int, bytes], int]
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class DuplicateEventError(ValueError):
    """An event id already in the log was posted again with a different body."""


def _digest(event: Mapping[str, Any]) -> str:
    """What identifies an event's content (not its timestamp or its seal's MAC, which a
    retry changes)."""
    body = {k: v for k, v in event.items() if k not in ("ts", "auth")}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def _key(event: Mapping[str, Any]) -> str:
    """The idempotency key: the sealing platform (if any) and the event id."""
    seal = event.get("auth")
    platform = seal.get("platform") if isinstance(seal, dict) else None
    return f"{platform if isinstance(platform, str) else ''}/{event['id']}"


class LogWriteError(OSError):
    """An event could not be written whole; the log was rolled back to its last line.
    `full` when the disk or a quota is full (507), else another I/O failure (503)."""

    @property
    def full(self) -> bool:
        return self.errno in FULL_ERRNOS


def check_log_path(path: Path) -> None:
    """Refuse a feedback-log path that is not (or cannot become) a regular file."""
    if path.is_symlink() and not path.exists():
        raise ConfigError(f"feedback_log: {path} is a dangling symbolic link")
    if path.exists() and not path.is_file():
        raise ConfigError(f"feedback_log: {path} is not a regular file (a FIFO, device or folder)")
    if path.parent.exists() and not path.parent.is_dir():
        raise ConfigError(f"feedback_log: {path.parent} is not a folder")


def _open_regular(name: str, access: int) -> int:
    """`name` opened for appending (created if missing), never through a symbolic link and
    only as a regular file; a `LogWriteError` naming it otherwise."""
    flags = access | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(name, flags, 0o644)
    except OSError as e:
        raise LogWriteError(e.errno or errno.EIO, f"{name}: {e.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise LogWriteError(errno.EINVAL, f"{name}: not a regular file")
    return fd


class FeedbackLog:
    def __init__(
        self, path: str | Path, *, rotate_bytes: int = 0, write: Writer = os.write
    ) -> None:
        """`rotate_bytes`: close the log as a segment once it holds that many bytes (0:
        never). `write`: the `os.write` to use (a test injects a failing one)."""
        self.path = Path(path)
        self.rotate_bytes = rotate_bytes
        check_log_path(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(
                f"feedback_log: cannot create {self.path.parent} ({e.strerror})"
            ) from None
        check_log_path(self.path)
        self._write = write
        self._lock = threading.Lock()
        self._seen: dict[str, str] = {}  # platform/event id -> content digest
        self._previous: dict[str, str] = {}  # the same, for the newest closed segment
        self._offset = 0
        self._inode: int | None = None  # the file `_seen` and `_offset` describe

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
        _remember_ids(self._seen, data[:end])
        self._offset += end

    def append(self, event: Mapping[str, Any]) -> bool:
        """Write `event` unless its id is already logged; True when it was written."""
        line = (json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        event_id, key, digest = str(event["id"]), _key(event), _digest(event)
        with self._lock:
            fd = self._open_live()
            try:
                self._repair_tail(fd)
                self._catch_up(fd)
                if self._known(key, digest, event_id):
                    return False
                if self.rotate_bytes and os.fstat(fd).st_size >= self.rotate_bytes:
                    # checked before: the segment closed here drops out of `_previous`
                    fd = self._rotate(fd)
                    self._repair_tail(fd)
                    self._catch_up(fd)
                    if self._known(key, digest, event_id):  # written meanwhile elsewhere
                        return False
                self._write_whole(fd, line)
                self._offset = os.fstat(fd).st_size
                self._seen[key] = digest
                return True
            finally:
                os.close(fd)  # releases the lock

    def _known(self, key: str, digest: str, event_id: str) -> bool:
        """Whether the event is already in the live log or the newest closed segment (a
        `DuplicateEventError` when its id is there with another body)."""
        known = self._seen.get(key, self._previous.get(key))
        if known is not None and known != digest:
            raise DuplicateEventError(
                f"event id {event_id!r} was already used for a different event"
            )
        return known is not None

    def _open(self) -> int:
        return _open_regular(str(self.path), os.O_RDWR)

    def _open_live(self) -> int:
        """The log, open and locked; once locked, it is checked to still be the log (a
        writer that waited for the lock may hold a segment another writer just closed)."""
        while True:
            fd = self._open()
            fcntl.flock(fd, fcntl.LOCK_EX)
            st = os.fstat(fd)
            try:
                now = os.stat(self.path, follow_symlinks=False)
            except FileNotFoundError:
                now = None
            if now is not None and (now.st_ino, now.st_dev) == (st.st_ino, st.st_dev):
                break
            os.close(fd)
        if self._inode is None:  # first look: the newest segment's ids guard retries too
            last = segments(self.path)
            self._previous = _ids(last[-1]) if last else {}
        elif st.st_ino != self._inode:  # another writer rotated: finish reading its segment
            self._next_segment(segment_with_inode(self.path, self._inode))
        self._inode = st.st_ino
        return fd

    def _next_segment(self, closed: Path | None) -> None:
        """Move on from the file `_seen` describes (now the segment `closed`, read to its
        end first) to a new, empty live log."""
        if closed is not None:
            try:
                side = os.open(closed, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                side = -1
            if side >= 0:
                try:
                    self._catch_up(side)
                finally:
                    os.close(side)
        self._previous, self._seen, self._offset = self._seen, {}, 0

    def _rotate(self, fd: int) -> int:
        """Close the full log `fd` (open and locked) as a segment; the new log, open and
        locked (`fd` is closed once it is, so a failure leaves the caller one to close)."""
        try:
            os.rename(self.path, next_segment_path(self.path))
        except OSError as e:  # the size is a soft bound: keep writing to the full log
            log.warning("feedback log: could not close %s as a segment (%s)", self.path, e)
            return fd
        _fsync_dir(self.path.parent)
        new = self._open_live()  # sees the new inode and moves `_seen` to `_previous`
        os.close(fd)
        return new

    def _write_whole(self, fd: int, line: bytes) -> None:
        """Write `line` and fsync it, or roll the file back to its size before and raise."""
        before = os.fstat(fd).st_size
        try:
            done = 0
            while done < len(line):
                n = self._write(fd, line[done:])
                if n <= 0:
                    raise OSError(errno.ENOSPC, "no bytes written")
                done += n
            os.fsync(fd)
        except OSError as e:
            try:
                os.ftruncate(fd, before)
                os.fsync(fd)
            except OSError:  # pragma: no cover - the repair itself failed
                pass
            code = e.errno or errno.EIO
            raise LogWriteError(code, f"{self.path}: {e.strerror or e}") from None

    def _repair_tail(self, fd: int) -> None:
        """Move a torn tail (bytes after the last newline: a writer that crashed before
        its fsync, never acknowledged) to `<log>.torn`, so no event is glued onto it."""
        size = os.fstat(fd).st_size
        if size == 0 or size < self._offset:
            return
        if os.pread(fd, 1, size - 1) == b"\n":
            return
        start = max(0, size - (1 << 20))
        chunk = os.pread(fd, size - start, start)
        cut = start + chunk.rfind(b"\n") + 1  # no newline at all: the whole chunk is torn
        torn = os.pread(fd, size - cut, cut)
        side = _open_regular(str(self.path) + ".torn", os.O_WRONLY)
        try:
            os.write(side, torn + b"\n")
        finally:
            os.close(side)
        os.ftruncate(fd, cut)
        os.fsync(fd)
        self._offset = min(self._offset, cut)


def _remember_ids(ids: dict[str, str], data: bytes) -> None:
    """Add the idempotency key and digest of each event line in `data` to `ids`."""
    for line in data.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("id"), str):
            ids.setdefault(_key(event), _digest(event))


def _ids(path: Path) -> dict[str, str]:
    """The idempotency keys and digests of a closed segment's events."""
    out: dict[str, str] = {}
    with contextlib.suppress(OSError):
        _remember_ids(out, path.read_bytes())
    return out


def _fsync_dir(folder: Path) -> None:
    """Make a rename in `folder` durable (best effort where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
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
