"""The chunked line splitter of `LogReader.run()` agrees with line-by-line reading.

`Lines` must hand out exactly the lines, over-long lines (with their sizes and bytes in
the sink) and incomplete tail that `readline` finds under the reader's rules, whatever
the chunk size: lines across chunk boundaries, a final line without newline, CRLF,
over-long lines of every size around the limit, invalid UTF-8. Then, through the
reader, `run()` must agree with iteration with tiny chunks.
"""

from __future__ import annotations

import io
import random

import pytest
from data_events import line, rating, route, selection
from test_data_validate_only import _both

import studio_align.data.chunked as chunked
from studio_align.data.chunked import Lines, Long
from studio_align.testing.synth import image_pool, synthetic_lines


class _Sink:
    def __init__(self) -> None:
        self.out = bytearray()

    def start(self) -> None:
        self.out += b"|"  # marks where each over-long line starts

    def write(self, chunk: bytes) -> None:
        self.out += chunk


def _reference(data: bytes, limit: int) -> tuple[list, bytes, int]:
    """The reader's line rules with `readline`, as `LogReader.__iter__` applies them."""
    f, out, sink, tail = io.BytesIO(data), [], bytearray(), 0
    while True:
        raw = f.readline(limit + 2)
        if not raw:
            break
        if not raw.endswith(b"\n") and len(raw) < limit + 2:
            tail = len(raw)
            break
        ending = 2 if raw.endswith(b"\r\n") else 1 if raw.endswith(b"\n") else 0
        if len(raw) - ending > limit:
            sink += b"|" + raw
            size = len(raw)
            while not raw.endswith(b"\n"):
                raw = f.readline(7)
                if not raw:
                    break
                sink += raw
                size += len(raw)
            out.append(Long(size))
        else:
            out.append(raw)
    return out, bytes(sink), tail


def _split(data: bytes, limit: int, chunk: int) -> tuple[list, bytes, int]:
    sink = _Sink()
    lines = Lines(io.BytesIO(data), limit, sink, chunk=chunk)
    out: list = []
    for batch in lines:
        if isinstance(batch, Long):
            out.append(batch)
        else:
            assert batch  # never an empty batch
            out.extend(batch)
    return out, bytes(sink.out), lines.tail


def _random_log(rng: random.Random, limit: int) -> bytes:
    parts = []
    for _ in range(rng.randint(0, 12)):
        size = rng.choice([0, 1, limit - 1, limit, limit + 1, limit + 2, limit + 3, 3 * limit])
        size = max(0, size + rng.randint(-1, 1))
        body = bytes(rng.choice(b'ab {}"\r\xff\xc3\xa9') for _ in range(size))
        parts.append(body + rng.choice([b"\n", b"\r\n", b"\n", b"\r\n", b""]))
    return b"".join(parts)


@pytest.mark.parametrize("limit", [2, 3, 5, 8, 17])
def test_lines_match_readline_for_any_chunk_size(limit):
    rng = random.Random(limit)
    for _ in range(300):
        data = _random_log(rng, limit)
        want = _reference(data, limit)
        for chunk in (1, 2, 3, limit, limit + 1, limit + 2, 64, 1 << 18):
            assert _split(data, limit, chunk) == want, (data, chunk)


def test_edges_of_the_limit_and_the_tail():
    cases = {
        b"abcd\n": ([b"abcd\n"], b"", 0),  # content at the limit
        b"abc\r\n": ([b"abc\r\n"], b"", 0),
        b"abcd\r\n": ([b"abcd\r\n"], b"", 0),  # CRLF at the limit: fits
        b"abcde\n": ([Long(6)], b"|abcde\n", 0),
        b"abcde\r\n": ([Long(7)], b"|abcde\r\n", 0),
        b"ab\nabcde": ([b"ab\n"], b"", 5),  # a tail shorter than limit + 2
        b"ab\nabcdef": ([b"ab\n", Long(6)], b"|abcdef", 0),  # at limit + 2: over-long
        b"abcdefgh\nxy\n": ([Long(9), b"xy\n"], b"|abcdefgh\n", 0),
        b"\n\r\n": ([b"\n", b"\r\n"], b"", 0),
    }
    for data, want in cases.items():
        assert _reference(data, 4) == want, data
        for chunk in (1, 2, 5, 100):
            assert _split(data, 4, chunk) == want, (data, chunk)


def test_run_agrees_with_iteration_with_tiny_chunks(tmp_path, monkeypatch):
    images = image_pool(tmp_path, 8)
    good = list(synthetic_lines(300, seed=9, images=images))
    rng = random.Random(4)
    specials = [
        b"\xef\xbb\xbf" + line(rating()),  # BOM: tolerated on a file's first line only
        line(rating()).replace(b"\n", b"\r\n"),
        b'{"type": "rating", "prompt": "\xff"}\n',
        line(rating(extra="x")).replace(b'"x"', b'"\xff"'),  # bad UTF-8 in an extra field
        line(rating(extra={"any": [1, 2]})),  # valid, with an extra field
        line(selection(extra=1)),
        line(route(extra=None)),
        b"   \n",
        b"\r\n",
        b'{"type": "rating", "prompt": "' + b"x" * 3000 + b'"}\n',  # over-long (limit 2000)
        b'{"type": "rating", "prompt": "' + b"y" * 1990 + b'"}\r\n',  # fits, with CRLF
    ]
    logs = []
    for i in range(3):
        lines = good[i * 100 : (i + 1) * 100] + specials
        rng.shuffle(lines)
        if i == 0:
            lines.insert(0, specials[0])
        body = b"".join(lines)
        tail = [b"", b'{"type": "rat', b"z" * 2500][i]  # none, a partial line, over-long
        path = tmp_path / f"log{i}.jsonl"
        path.write_bytes(body + tail)
        logs.append(path)
    for chunk in (7, 300, 4096):
        monkeypatch.setattr(chunked, "CHUNK", chunk)
        it, run = _both(logs, max_line_bytes=2000)
        assert it == run, chunk
        assert it[0][1] >= 300 and it[0][2] >= 9  # valid and invalid lines really there
