"""The reader's msgspec fast path agrees with the pydantic models, line for line.

`fast_event` may only ever *accept* a line, and what it builds must equal what pydantic
builds from the same bytes (values, `model_fields_set`, JSON dump); every line it does
not accept is left to pydantic, so errors and quarantine are pydantic's by construction.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

import pytest
from data_events import rating, retouch, route, selection
from pydantic import ValidationError

from studio_align.data.fastdecode import fast_event
from studio_align.data.schemas import EVENT_ADAPTER
from studio_align.testing.synth import synthetic_lines


def _pydantic(line: bytes):
    try:
        return EVENT_ADAPTER.validate_json(line)
    except ValidationError:
        return None


def _agrees(line: bytes) -> bool:
    """Asserts agreement; returns whether the fast path decided the line."""
    fast, slow = fast_event(line), _pydantic(line)
    if fast is None:
        return False
    assert slow is not None, line
    assert type(fast) is type(slow) and fast == slow, line
    assert fast.model_fields_set == slow.model_fields_set, line
    assert fast.model_dump_json() == slow.model_dump_json(), line
    assert fast.model_dump() == slow.model_dump(), line
    return True


def _dumps(ev: dict) -> bytes:
    return json.dumps(ev, ensure_ascii=False).encode() + b"\n"


def test_generated_lines_take_the_fast_path(tmp_path):
    lines = list(synthetic_lines(2000, seed=3, images=["img/p0.png", "img/p1.png"]))
    decided = sum(_agrees(line) for line in lines)
    assert decided == len(lines)  # the common shapes never fall back


EDGE_CASES = [
    selection(),
    selection(candidates=[{"id": "a", "image": "x"}, {"id": "a", "image": "y"}]),  # dup ids
    selection(chosen=["z"]),  # not a candidate
    selection(chosen=["a", "a"]),
    selection(chosen=[]),
    selection(candidates=[{"id": "a", "image": "x"}]),
    selection(ts="2026-11-01T10:00:00"),  # naive
    selection(ts="2026-11-01T10:00:00+02:00"),
    selection(ts="2026-11-01 10:00:00Z"),
    selection(ts="2026-11-01T10:00:00.123456789Z"),
    selection(ts="2026-11-01t10:00:00z"),
    selection(ts=1700000000),
    selection(id=5),
    selection(id=""),
    selection(prompt=""),
    selection(extra={"anything": [1, 2]}),
    selection(session=None),
    route(),
    route(final=None, outcome="accepted"),
    route(outcome="accepted"),  # final differs from proposed
    route(outcome="abandoned"),
    route(final=["wan.image_to_video"]),  # rerouted to the same plan
    {k: v for k, v in route(outcome="accepted").items() if k != "final"},
    {k: v for k, v in route().items() if k != "final"},
    route(request={"text": "t"}),
    route(request={"text": "t", "attachments": ["pdf"]}),
    route(request={"text": 3}),
    route(proposed=[]),
    route(proposed=[""]),
    route(outcome="maybe"),
    retouch(),
    retouch(before={"exposure": 0}, after={"exposure": 1}),  # JSON integers as floats
    retouch(before={"a": 0.0}, after={"b": 1.0}),
    retouch(before={}, after={}),
    retouch(after={"exposure": True}),
    retouch(session=None),
    retouch(session=""),
    rating(),
    rating(label="meh"),
    rating(session="s1"),
    rating(image=""),
    {"type": "unknown", "id": "x"},
    {"id": "x"},
]


@pytest.mark.parametrize("event", EDGE_CASES, ids=range(len(EDGE_CASES)))
def test_edge_cases_agree(event):
    _agrees(_dumps(event))


@pytest.mark.parametrize(
    "raw",
    [
        b'{"type": "rating", "id": "x", "prompt": "\xff\xfe"}\n',
        b"{truncated json\n",
        b"[1, 2]\n",
        b'{"type": "retouch", "id": "e", "ts": "2026-11-01T00:00:00Z", "creator": "c", '
        b'"image": "i", "before": {"a": 1e400}, "after": {"a": 1.0}}\n',
        b'{"type": "retouch", "id": "e", "ts": "2026-11-01T00:00:00Z", "creator": "c", '
        b'"image": "i", "before": {"a": NaN}, "after": {"a": 1.0}}\n',
        b'{"type": "rating", "type": "rating", "id": "x", "ts": "2026-11-01T00:00:00Z", '
        b'"creator": "c", "prompt": "p", "image": "i", "label": "up"}\r\n',
        b'{"type": "rating", "id": "\\ud800", "ts": "2026-11-01T00:00:00Z", '
        b'"creator": "c", "prompt": "p", "image": "i", "label": "up"}\n',
    ],
)
def test_raw_lines_agree(raw):
    _agrees(raw)


@pytest.mark.parametrize(
    "value",
    [b'"\xff"', b'"\\q"', b'"\\ud800"', b'"\\udc00x"', b'"a\tb"', b"01", b"1.", b"-", b"[1,]",
     b'{"a": 1,}', b"tru", b"nul", b"1e", b'"\\u12"', b"[[[[]]]]", b"{}", b'"ok"', b"-0.0e-5"],
)  # fmt: skip
def test_unknown_fields_are_checked_like_pydantic(value):
    """msgspec skips a field the struct does not know; its bytes must still be valid JSON
    and UTF-8 for pydantic, so a skipped field is no back door."""
    good = _dumps(rating())
    _agrees(good[:-2] + b', "extra": ' + value + b"}\n")


def mutated_lines(base: list[bytes], n: int, seed: int) -> Iterator[bytes]:
    """`n` byte-level mutations (1-3 replaced, deleted or inserted bytes) of `base` lines."""
    rng = random.Random(seed)
    for _ in range(n):
        line = bytearray(rng.choice(base))
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(line) - 1)
            op = rng.random()
            if op < 0.4:
                line[i] = rng.choice(b'"{}[],:0123456789.eE+-ntfaulrsZz \\')
            elif op < 0.7:
                del line[i]
            else:
                line.insert(i, rng.randrange(256))
        yield bytes(line)


def test_mutated_lines_agree():
    """Byte-level mutations of valid lines: whatever the fast path accepts, pydantic does."""
    base = [_dumps(e) for e in (selection(), route(), retouch(), rating())]
    for line in mutated_lines(base, 3000, seed=0):
        _agrees(line)
