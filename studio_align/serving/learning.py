"""The server's learning loop: its exemplar memory is a view of the feedback log.

Design choice (durability): the server never saves a memory. The feedback log is the
one record of what was learned: every acknowledged event is in it, fsync-ed, before the
answer goes out (`feedback.py`). A `Learner` rebuilds the memory from the log whenever a
model is loaded (at start and on every reload, with that model's embeddings, which an
old memory's could not match anyway), then follows the log: each new complete line is
added once. So after a SIGKILL, a reload or with a read-only model folder, every
acknowledged event still counts, and feedback that arrived during warm-up is in the
memory as soon as the model is ready.

What counts: an accepted or re-routed event sealed by a configured platform's key
(`auth.Verifier.opened_by`), whose plan the router could have produced itself. Its
creator is keyed `<platform>:<creator>` and its source is the platform, so population
votes and source quotas are per platform (`router/memory.py`). Unsealed lines (written
by a server without platform keys, or by hand) are kept in the log for training and
teach the memory nothing.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from studio_align.router.memory import ExemplarMemory, MemorySettings
from studio_align.serving.auth import Verifier, creator_key
from studio_align.serving.segments import segment_with_inode, segments

CHUNK_BYTES = 4 << 20
Exemplar = tuple[dict[str, Any], list[str], str, str]  # request, plan, creator key, source


def _open_read(path: Path) -> int | None:
    """`path` open for reading (never through a link), or None where it is missing."""
    try:
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None


def _inode(path: Path) -> int | None:
    try:
        return path.stat(follow_symlinks=False).st_ino
    except OSError:
        return None


def _read(fd: int, offset: int, cap: int | None = None) -> tuple[list[dict[str, Any]], int]:
    """The complete lines in one chunk (`CHUNK_BYTES`, at most `cap`) from `offset`, and the
    offset after them. A line longer than the chunk is read to its end (never past `cap`
    bytes), or following the log would stop at it for good."""
    limit = CHUNK_BYTES if cap is None else min(CHUNK_BYTES, cap)
    data = os.pread(fd, limit, offset)
    while b"\n" not in data and len(data) == limit and (cap is None or limit < cap):
        limit = limit * 2 if cap is None else min(limit * 2, cap)
        data = os.pread(fd, limit, offset)
    end = data.rfind(b"\n") + 1  # a line still being written is read next time
    events = []
    for line in data[:end].splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events, offset + end


class Learner:
    """Builds and follows a router's memory from the feedback log (module docstring)."""

    def __init__(
        self,
        path: str | Path,
        verifier: Verifier,
        *,
        settings: MemorySettings | None = None,
        buckets: Sequence[int] = (1,),
    ) -> None:
        self.path = Path(path)
        self.verifier = verifier
        self.settings = settings
        self.buckets = sorted(buckets)
        # id(router) -> (inode of the file it is reading, bytes of it learned)
        self.offsets: dict[int, tuple[int | None, int]] = {}
        self.lock = threading.Lock()

    def supports(self, router: Any) -> bool:
        return callable(getattr(router, "remember", None)) and self.verifier.enabled

    def build(self, router: Any) -> int:
        """Give `router` the memory of the log (the live log and its newest closed segment,
        `segments.segments`, on top of its checkpoint's memory); returns the exemplars added.
        Two passes: the first reads who each event is from and asks the memory's bounds which
        events will stay (`ExemplarMemory.survivors`); the second embeds only those, so a
        reload costs the memory's size, not the log's."""
        if not self.supports(router):
            return 0
        base = getattr(router, "memory", None)
        if base is None:
            base = ExemplarMemory(self.settings)
        settings = self.settings if self.settings is not None else base.cfg
        fds = self._history()
        try:
            entries: list[tuple[str, str]] = []
            ends = []
            for fd in fds:
                end = 0
                for events, after in self._chunks(fd, 0):
                    entries += [(c, src) for _, _, c, src in self._eligible(router, events)]
                    end = after
                ends.append(end)
            keep = base.survivors(entries, settings)
            router.memory = base.with_settings(settings, keep[: len(base)])
            added, j = 0, len(base)
            for fd, end in zip(fds, ends, strict=True):
                for events, _ in self._chunks(fd, 0, stop=end):
                    rows = self._eligible(router, events)
                    flags, j = keep[j : j + len(rows)], j + len(rows)
                    chosen = [r for r, f in zip(rows, flags, strict=True) if f]
                    added += self._remember(router, chosen)
            self.offsets[id(router)] = (os.fstat(fds[-1]).st_ino, ends[-1]) if fds else (None, 0)
        finally:
            for fd in fds:
                os.close(fd)
        return added + self.follow(router)

    def forget(self, router: Any) -> None:
        self.offsets.pop(id(router), None)

    def follow(self, router: Any) -> int:
        """Add the log's complete lines `router` has not learned yet; returns how many. Where
        writers rotated the log since the last look, the rest of the segment it was reading
        and any closed after it come first."""
        if id(router) not in self.offsets:
            return 0
        inode, offset = self.offsets[id(router)]
        fd = _open_read(self.path)
        if fd is None:
            return 0
        added = 0
        try:
            live = os.fstat(fd)
            if inode is not None and live.st_ino != inode:
                for seg in self._closed_since(inode):
                    side = _open_read(seg)
                    if side is None:
                        continue
                    try:
                        for events, _ in self._chunks(side, offset):
                            added += self._remember(router, self._eligible(router, events))
                    finally:
                        os.close(side)
                    offset = 0
                self.offsets[id(router)] = (live.st_ino, 0)
                offset = 0
            elif live.st_size < offset:  # truncated in place: nothing to follow
                return 0
            for events, end in self._chunks(fd, offset):
                added += self._remember(router, self._eligible(router, events))
                self.offsets[id(router)] = (live.st_ino, end)
        finally:
            os.close(fd)
        return added

    def history(self) -> list[Path]:
        """What a build learns from: the newest closed segment and the live log."""
        return [*segments(self.path)[-1:], self.path]

    def _history(self) -> list[int]:
        """`history`, open for reading and held open, so a rotation meanwhile changes
        nothing a build reads. The live log is opened first: if it is closed before the
        segments are listed, it is the newest of them, and the one before it is read."""
        live = _open_read(self.path)
        inode = os.fstat(live).st_ino if live is not None else None
        older = [q for q in segments(self.path) if _inode(q) != inode]
        fds = [_open_read(q) for q in older[-1:]] + [live]
        return [fd for fd in fds if fd is not None]

    def _closed_since(self, inode: int) -> list[Path]:
        """The closed segment that is the file `inode` and every segment closed after it
        (none when no segment is that file: it was replaced, not rotated)."""
        closed = segments(self.path)
        found = segment_with_inode(self.path, inode)
        return [] if found is None else closed[closed.index(found) :]

    def _chunks(
        self, fd: int, offset: int, stop: int | None = None
    ) -> Iterator[tuple[list[dict[str, Any]], int]]:
        """The complete lines of `fd` from `offset` (up to `stop`), chunk by chunk, each
        with the offset after it."""
        while stop is None or offset < stop:
            events, end = _read(fd, offset, None if stop is None else stop - offset)
            if end == offset:
                return
            yield events, end
            offset = end

    def _eligible(self, router: Any, events: list[dict[str, Any]]) -> list[Exemplar]:
        """The events that teach the memory (module docstring), as exemplars."""
        out: list[Exemplar] = []
        for e in events:
            if e.get("type") != "route" or e.get("outcome") not in ("accepted", "rerouted"):
                continue
            platform = self.verifier.opened_by(e)
            request, creator = e.get("request"), e.get("creator")
            plan = e.get("final") if e.get("outcome") == "rerouted" else e.get("proposed")
            if platform is None or not isinstance(request, dict) or not isinstance(creator, str):
                continue
            if not isinstance(plan, list) or not isinstance(request.get("text"), str):
                continue
            req = {"text": request["text"], "attachments": list(request.get("attachments", []))}
            allowed = getattr(router, "plan_allowed", None)
            if allowed is not None and not allowed(plan, req["attachments"]):
                continue
            out.append((req, plan, creator_key(platform, creator), platform))
        return out

    def _remember(self, router: Any, rows: list[Exemplar]) -> int:
        """Add `rows` to the router's memory in the batch buckets it was warmed for."""
        if not rows:
            return 0
        reqs, plans, creators, sources = (list(col) for col in zip(*rows, strict=True))
        top = self.buckets[-1]
        n = 0
        for s in range(0, len(reqs), top):
            size = next(b for b in self.buckets if b >= len(reqs[s : s + top]))
            sl = slice(s, s + top)
            n += int(
                router.remember(reqs[sl], plans[sl], creators[sl], sources=sources[sl], pad_to=size)
            )
        return n
