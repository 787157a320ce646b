"""The quarantine writer: invalid lines copied verbatim, so a fixed copy can be re-read.

Split from the reader, whose two read modes (and the chunked line splitter, for an
over-long line) write through it.
"""

from __future__ import annotations

from typing import IO


class Quarantine:
    """Writes invalid lines verbatim. If a copied line had no final newline (last line
    of a file) and another line follows, a `\\n` is inserted so lines never merge."""

    def __init__(self, sink: IO[bytes]) -> None:
        self._sink = sink
        self._open_line = False

    def start(self) -> None:
        if self._open_line:
            self._sink.write(b"\n")
            self._open_line = False

    def write(self, chunk: bytes) -> None:
        if chunk:
            self._sink.write(chunk)
            self._open_line = not chunk.endswith(b"\n")
