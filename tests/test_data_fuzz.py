"""Property-based fuzz of the creator-log reader (hypothesis).

A log is built from segments whose fate is known: valid events, truncated JSON, fields of
the wrong JSON type, over-long lines, invalid UTF-8, random bytes and blank lines, joined
by `\\n` or `\\r\\n`, the last one possibly without a final newline. Whatever the mix:
the reader never crashes, every line is valid, invalid or blank (valid + quarantined +
blank == total), each segment gets the fate it was built for, and the quarantine file is
exactly the invalid lines, byte for byte.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from studio_align.catalog import default_catalog
from studio_align.data.reader import LogReader
from studio_align.testing.synth import image_pool, make_event

MAX_LINE = 2048
CATALOG = default_catalog()
KINDS = ("selection", "route", "retouch", "rating")
WRONG_VALUES = {
    str: [1, 2.5, True, None, [], {}],
    list: ["x", 3, {}, None],
    dict: ["x", 3, [], None],
}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("fuzzlogs")
    image_pool(d, 4)
    return d


def _event(seed: int, kind: str) -> dict:
    rng = random.Random(seed)
    return make_event(
        kind, rng, index=seed, images=[f"img/p{i}.png" for i in range(4)], catalog=CATALOG
    )


def _dump(obj: dict) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode()


@st.composite
def segment(draw) -> tuple[str, bytes]:
    """(expected fate, line content without its ending)."""
    kind = draw(st.sampled_from(KINDS))
    event = _event(draw(st.integers(0, 10_000)), kind)
    how = draw(
        st.sampled_from(
            ["valid", "truncated", "wrong_type", "too_long", "bad_utf8", "random", "blank"]
        )
    )
    if how == "valid":
        return "valid", _dump(event)
    if how == "truncated":
        raw = _dump(event)
        return "invalid", raw[: draw(st.integers(1, len(raw) - 1))]
    if how == "wrong_type":
        key = draw(st.sampled_from(sorted(k for k in event if k != "type")))
        event[key] = draw(st.sampled_from(WRONG_VALUES[type(event[key])]))
        return "invalid", _dump(event)
    if how == "too_long":
        event["padding"] = "x" * draw(st.integers(MAX_LINE, 3 * MAX_LINE))
        return "invalid", _dump(event)
    if how == "bad_utf8":
        event["id"] = "@@"
        bad = draw(
            st.sampled_from([b"\xff", b"\xc3\x28", b"\xe2\x82", b"\xed\xa0\x80", b"\x80abc"])
        )
        return "invalid", _dump(event).replace(b"@@", bad)
    if how == "random":
        raw = draw(st.binary(min_size=1, max_size=300).filter(lambda b: b"\n" not in b))
        return ("blank" if raw.isspace() else "invalid"), raw
    return "blank", draw(st.text(alphabet=" \t\r", max_size=5)).encode()


@st.composite
def log_file(draw) -> tuple[bytes, list[str], list[bytes]]:
    segments = draw(st.lists(segment(), min_size=0, max_size=25))
    fates, lines = [], []
    for i, (fate, content) in enumerate(segments):
        last = i == len(segments) - 1
        ending = draw(st.sampled_from([b"\n", b"\r\n"] + ([b""] if last else [])))
        if ending == b"" and content == b"":
            continue  # an empty unterminated tail is no line at all
        if ending == b"" and len(content) < MAX_LINE + 2:
            fate = "tail"  # a partial last line is not read (a writer may be appending)
        fates.append(fate)
        lines.append(content + ending)
    return b"".join(lines), fates, lines


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(log=log_file())
def test_reader_never_crashes_and_accounts_for_every_line(logdir, log):
    data, fates, lines = log
    path = logdir / "fuzz.jsonl"
    path.write_bytes(data)
    sink = io.BytesIO()
    reader = LogReader(path, catalog=CATALOG, quarantine=sink, max_line_bytes=MAX_LINE, follow=True)
    valid_lines = [e.line for e in reader]
    s = reader.summary

    tail = len(lines[-1]) if fates and fates[-1] == "tail" else 0
    assert s.files[0].incomplete_tail == tail
    assert s.total_lines == len(lines) - bool(tail)
    assert s.valid + s.invalid_count + s.blank == s.total_lines
    invalid_lines = [x.line for x in s.invalid]
    assert [i + 1 for i, f in enumerate(fates) if f == "valid"] == valid_lines, s.invalid
    assert [i + 1 for i, f in enumerate(fates) if f == "invalid"] == invalid_lines
    assert s.blank == fates.count("blank")
    assert sink.getvalue() == b"".join(lines[i - 1] for i in invalid_lines)


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=2000))
def test_reader_survives_arbitrary_bytes(logdir, data):
    path = logdir / "bytes.jsonl"
    path.write_bytes(data)
    sink = io.BytesIO()
    reader = LogReader(path, quarantine=sink, max_line_bytes=256, follow=True)
    list(reader)
    s = reader.summary
    lines = data.split(b"\n")
    tail = lines[-1] if len(lines[-1]) < 256 + 2 else b""  # unterminated and not over the limit
    physical = [seg + b"\n" for seg in lines[:-1]] + ([lines[-1]] if lines[-1] and not tail else [])
    assert s.total_lines == len(physical) and s.files[0].incomplete_tail == len(tail)
    assert s.valid + s.invalid_count + s.blank == s.total_lines
    assert sink.getvalue() == b"".join(physical[x.line - 1] for x in s.invalid)
