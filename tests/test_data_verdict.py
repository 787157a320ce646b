"""The validate-only verdicts (`verdict.py`) only ever pass lines the full path accepts.

A verdict of "valid" skips pydantic and the context checks' reasons, so it must never
pass a line that pydantic refuses or whose context check fails; every line it does not
pass goes to the full path, which decides it. Checked on the fast-path edge cases,
raw byte lines, unknown fields of every JSON shape, byte mutations and a grid of
timestamps; and the common line must be passed by the strict decoder itself.
"""

from __future__ import annotations

import pytest
from data_events import rating, retouch, route, selection
from pydantic import ValidationError
from test_data_fastdecode import EDGE_CASES, _dumps, mutated_lines

from studio_align.catalog import default_catalog
from studio_align.data.context import ContextChecks
from studio_align.data.schemas import EVENT_ADAPTER
from studio_align.data.verdict import DecodeErrors, Verdicts, decode, lenient
from studio_align.testing.synth import synthetic_lines

IMAGES = ["img/p0.png", "img/p1.png", "img/p2.png", "img/p3.png", "x", "y", "i"]


@pytest.fixture
def verdicts() -> tuple[Verdicts, ContextChecks]:
    context = ContextChecks(
        default_catalog(), check_images=False, images_root=None, allow_external_images=True
    )
    context.start_file("/nonexistent")
    context.good.update(IMAGES)  # as if the full path had confirmed them
    v = Verdicts(context)
    v.start_file()
    return v, context


def _passes(line: bytes, v: Verdicts) -> bool:
    try:
        ev = decode(line)
    except DecodeErrors:
        ev = lenient(line)
    return ev is not None and v.by_type[type(ev)](ev)


def _sound(line: bytes, verdicts: tuple[Verdicts, ContextChecks]) -> bool:
    """Asserts that a passed line is valid for the full path; returns whether it passed."""
    v, context = verdicts
    if not _passes(line, v):
        return False
    try:
        event = EVENT_ADAPTER.validate_json(line)
    except ValidationError as e:
        raise AssertionError(f"verdict passed a line pydantic refuses: {line!r}") from e
    assert context.problem(event) is None, line
    return True


def test_generated_lines_pass_the_strict_decoder(verdicts):
    v, _ = verdicts
    lines = list(synthetic_lines(2000, seed=3, images=IMAGES[:2]))
    for line in lines:
        ev = decode(line)  # no exception: the common line needs no second chance
        assert v.by_type[type(ev)](ev), line
        assert _sound(line, verdicts)


@pytest.mark.parametrize("event", EDGE_CASES, ids=range(len(EDGE_CASES)))
def test_edge_cases_are_sound(event, verdicts):
    _sound(_dumps(event), verdicts)


def test_context_failures_are_not_passed(verdicts):
    v, _ = verdicts
    for event in (
        rating(image="unseen.png"),
        retouch(image="unseen.png"),
        selection(candidates=[{"id": "a", "image": "x"}, {"id": "b", "image": "unseen"}]),
        route(proposed=["wan.teleport"]),
        route(final=["wan.image_to_video", "audio.karaoke"]),
        route(request={"text": "x"}, proposed=["audio.music"], final=["wan.image_to_video"]),
    ):
        assert not _passes(_dumps(event), v), event


@pytest.mark.parametrize(
    "value",
    [b'"\xff"', b'"\\q"', b'"\\ud800"', b'"a\tb"', b"01", b"[1,]", b"{}", b'"\xc3\xa9"',
     b'{"k": "\xed\xa0\x80"}', b"-0.0e-5", b"null"],
)  # fmt: skip
def test_extra_fields_take_the_lenient_decoder_soundly(value, verdicts):
    """Extra fields fail the strict structs; `lenient` checks the UTF-8 msgspec skips."""
    line = _dumps(rating(image="x"))[:-2] + b', "extra": ' + value + b"}\n"
    with pytest.raises(DecodeErrors):
        decode(line)
    passed = _sound(line, verdicts)
    assert passed == (value in (b"{}", b'"\xc3\xa9"', b"-0.0e-5", b"null"))


def test_mutated_lines_are_sound(verdicts):
    base = [_dumps(e) for e in (selection(), route(), retouch(), rating(extra=[1]))]
    passed = 0
    for line in mutated_lines(base, 4000, seed=7):
        passed += _sound(line, verdicts)
    assert passed > 100  # mutations that keep a line valid are really exercised


def test_timestamps_never_pass_what_pydantic_refuses(verdicts):
    """msgspec parses `ts`: over a grid of RFC 3339 and near-miss shapes, whatever it
    accepts pydantic accepts, and the canonical shapes pass."""
    v, _ = verdicts
    dates = ["2026-11-01", "2024-02-29", "2026-02-29", "0000-01-01", "2026-13-01", "20261101"]
    seps = ["T", "t", " ", "_"]
    times = ["10:00:00", "10:00", "24:00:00", "23:59:60", "10:00:00.5", "10:00:00.1234567"]
    zones = ["Z", "z", "+02:00", "-00:00", "+0200", "+02", "", "+24:00"]
    accepted = 0
    for d in dates:
        for sep in seps:
            for t in times:
                for z in zones:
                    accepted += _sound(_dumps(rating(ts=f"{d}{sep}{t}{z}", image="x")), verdicts)
    assert accepted >= 20
    for ts in ("2026-11-01T10:00:00Z", "2026-11-01T10:00:00.5+02:00", "2024-02-29T23:59:59Z"):
        assert _passes(_dumps(rating(ts=ts, image="x")), v), ts
