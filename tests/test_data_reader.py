"""Creator-log reader: one test per invalid reason, line accounting, quarantine bytes."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest
from data_events import line, rating, retouch, route, selection

from studio_align.catalog import Catalog, Engine, default_catalog
from studio_align.data.reader import LogReader, Reason, validate_logs
from studio_align.data.schemas import RouteEvent, SelectionEvent
from studio_align.errors import DataError
from studio_align.testing.synth import image_pool, make_event


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    image_pool(tmp_path, 8)
    return tmp_path


def write(logdir: Path, data: bytes, name: str = "log.jsonl") -> Path:
    p = logdir / name
    p.write_bytes(data)
    return p


def test_the_design_examples_are_valid(logdir):
    p = write(logdir, b"".join(line(e) for e in (selection(), route(), retouch(), rating())))
    reader = LogReader(p)
    entries = list(reader)
    s = reader.summary
    assert [e.event.type for e in entries] == ["selection", "route", "retouch", "rating"]
    assert [e.line for e in entries] == [1, 2, 3, 4]
    assert s.total_lines == 4 and s.valid == 4 and s.invalid_count == 0 and s.ok
    assert dict(s.by_type) == {"selection": 1, "route": 1, "retouch": 1, "rating": 1}
    sel = entries[0].event
    assert isinstance(sel, SelectionEvent) and [c.id for c in sel.unchosen] == ["a", "c"]
    assert entries[0].image_path("img/p0.png") == str(logdir.resolve() / "img/p0.png")
    r = entries[1].event
    assert isinstance(r, RouteEvent) and r.preferred_plan == ["wan.image_to_video", "audio.music"]


def _one_invalid(logdir: Path, raw: bytes, **options) -> tuple[Reason, str]:
    p = write(logdir, line(rating()) + raw + line(rating()))
    s = validate_logs(p, **options)
    assert s.total_lines == 3 and s.valid == 2 and s.invalid_count == 1, s.invalid
    bad = s.invalid[0]
    assert bad.line == 2 and bad.path == str(p)
    assert str(bad).startswith(f"{p}:2: {bad.reason}: ")
    return bad.reason, bad.detail


@pytest.mark.parametrize(
    ("raw", "reason", "needle"),
    [
        (b'{"type": "rating", "id": "x"\n', Reason.BAD_JSON, "EOF"),
        (b"not json at all\n", Reason.BAD_JSON, ""),
        (b'{"type": "rating"} trailing\n', Reason.BAD_JSON, "trailing"),
        (b'{"type": "rating", "prompt": "caf\xe9"}\n', Reason.NON_UTF8, "byte"),
        (b"\xff\xfe\x00garbage\n", Reason.NON_UTF8, "byte 0"),
        (b"[1, 2, 3]\n", Reason.WRONG_TYPE, "not a JSON object"),
        (b'"a string"\n', Reason.WRONG_TYPE, "not a JSON object"),
        (line(rating(id=5)), Reason.WRONG_TYPE, "id"),
        (line(rating(ts=1700000000)), Reason.WRONG_TYPE, "ts"),
        (line(selection(candidates="a,b")), Reason.WRONG_TYPE, "candidates"),
        (line(retouch(after={"exposure": "bright", "contrast": 0.1})), Reason.WRONG_TYPE, "after.exposure"),
        (line({k: v for k, v in rating().items() if k != "label"}), Reason.MISSING_FIELD, "label"),
        (line({k: v for k, v in selection().items() if k != "session"}), Reason.MISSING_FIELD, "session"),
        (line({k: v for k, v in rating().items() if k != "type"}), Reason.MISSING_FIELD, "type"),
        (line(route(final=None)), Reason.MISSING_FIELD, "final"),
        (line(rating(type="comment")), Reason.UNKNOWN_TYPE, "comment"),
        (line(rating(label="meh")), Reason.INVALID_VALUE, "label"),
        (line(rating(ts="2026-11-01T10:03:00")), Reason.INVALID_VALUE, "timezone"),
        (line(rating(ts="yesterday")), Reason.INVALID_VALUE, "ts"),
        (line(rating(creator="")), Reason.INVALID_VALUE, "creator"),
        (line(selection(chosen=["z"])), Reason.INVALID_VALUE, "not among candidate"),
        (line(selection(candidates=[{"id": "a", "image": "img/p0.png"}])), Reason.INVALID_VALUE, "candidates"),
        (line(route(outcome="accepted")), Reason.INVALID_VALUE, "differs"),
        (line(route(final=["wan.image_to_video"])), Reason.INVALID_VALUE, "equals"),
        (line(route(outcome="maybe")), Reason.INVALID_VALUE, "outcome"),
        (line(route(request={"text": "x", "attachments": ["pdf"]})), Reason.INVALID_VALUE, "attachments"),
        (line(retouch(before={"exposure": 0.0})), Reason.INVALID_VALUE, "different parameters"),
        (b'{"type": "retouch", "id": "e3", "ts": "2026-11-01T10:02:00Z", "creator": "c", "image": "img/p0.png", "before": {"x": NaN}, "after": {"x": 1}}\n', Reason.INVALID_VALUE, "finite"),
        (line(route(proposed=["wan.teleport"])), Reason.UNKNOWN_STEP, "proposed[0] 'wan.teleport'"),
        (line(route(final=["wan.image_to_video", "audio.karaoke"])), Reason.UNKNOWN_STEP, "final[1]"),
        (line(route(request={"text": "x", "attachments": []}, outcome="accepted", final=None)), Reason.INVALID_PLAN, "needs image"),
        (line(route(request={"text": "x", "attachments": []}, proposed=["audio.music"], final=["wan.image_to_video"])), Reason.INVALID_PLAN, "final"),
        (line(selection(candidates=[{"id": "a", "image": "img/p0.png"}, {"id": "b", "image": "img/nope.png"}])), Reason.MISSING_IMAGE, "candidates[1].image 'img/nope.png'"),
        (line(retouch(image="elsewhere/x.png")), Reason.MISSING_IMAGE, "image 'elsewhere/x.png'"),
        (line(rating(image="img")), Reason.MISSING_IMAGE, "not found"),  # a directory is not an image
    ],
)  # fmt: skip
def test_every_reason(logdir, raw, reason, needle):
    got, detail = _one_invalid(logdir, raw)
    assert got == reason, detail
    assert needle in detail


def test_abandoned_or_rerouted_proposal_may_be_unsatisfiable(logdir):
    # A proposal the creator rejected is a negative example, so it need not be a valid plan.
    no_image = {"text": "x", "attachments": []}
    p = write(
        logdir,
        line(route(request=no_image, proposed=["wan.image_to_video"], final=["wan.text_to_video"]))
        + line(
            route(
                request=no_image, proposed=["wan.image_to_video"], final=None, outcome="abandoned"
            )
        ),
    )
    assert validate_logs(p).valid == 2


def test_image_check_can_be_turned_off(logdir):
    raw = line(rating(image="missing.png"))
    assert validate_logs(write(logdir, raw)).invalid_count == 1
    assert validate_logs(write(logdir, raw), check_images=False).valid == 1


def test_absolute_image_paths_need_a_root_or_opt_in(logdir, tmp_path_factory):
    other = tmp_path_factory.mktemp("elsewhere")
    img = other / "abs.png"
    img.write_bytes(b"png")
    log = write(logdir, line(rating(image=str(img))))
    assert validate_logs(log).by_reason == {"image_outside_root": 1}
    assert validate_logs(log, images_root=other).valid == 1
    assert validate_logs(log, allow_external_images=True).valid == 1


def test_plugin_engines_count(logdir):
    raw = line(route(proposed=["acme.upscale"], final=None, outcome="accepted"))
    assert validate_logs(write(logdir, raw)).by_reason == {"unknown_step": 1}
    catalog = default_catalog()
    catalog.add(Engine("acme.upscale", frozenset({"image"}), None))
    assert validate_logs(write(logdir, raw), catalog=catalog).valid == 1
    assert validate_logs(write(logdir, raw), catalog=Catalog(engines=[])).invalid_count == 1


def test_blank_lines_are_counted_not_invalid(logdir):
    data = b"\n" + line(rating()) + b"   \r\n" + b"\t\n" + line(rating())
    reader = LogReader(write(logdir, data), quarantine=io.BytesIO())
    assert [e.line for e in reader] == [2, 5]
    s = reader.summary
    assert (s.total_lines, s.valid, s.invalid_count, s.blank) == (5, 2, 0, 3)
    assert reader.quarantine.getvalue() == b""


def test_crlf_bom_and_missing_final_newline(logdir):
    bom = b"\xef\xbb\xbf"
    tail = line(retouch())[:-1]  # last line has no \n
    data = bom + line(rating())[:-1] + b"\r\n" + tail
    reader = LogReader(write(logdir, data))  # a whole file: the tail is a line
    assert [(e.line, e.event.type) for e in reader] == [(1, "rating"), (2, "retouch")]
    assert reader.summary.total_lines == 2 and reader.summary.files[0].incomplete_tail == 0
    # a live follower (a writer may still be appending) stops at the last newline
    reader = LogReader(write(logdir, data), follow=True)
    assert [(e.line, e.event.type) for e in reader] == [(1, "rating")]
    assert reader.summary.total_lines == 1 and reader.summary.invalid_count == 0
    assert reader.summary.files[0].incomplete_tail == len(tail)


@pytest.mark.parametrize("mode", ["iterate", "run"])
def test_a_last_line_without_newline_is_counted_valid_or_quarantined(logdir, mode):
    good, bad = line(rating())[:-1], b'{"type": "rating", "id": "x"'
    for tail, valid, invalid in ((good, 2, 0), (bad, 1, 1)):
        sink = io.BytesIO()
        reader = LogReader(write(logdir, line(rating()) + tail), quarantine=sink)
        s = list(reader) and reader.summary if mode == "iterate" else reader.run()
        assert (s.total_lines, s.valid, s.invalid_count) == (2, valid, invalid)
        assert sink.getvalue() == (b"" if valid == 2 else bad)  # quarantined byte for byte


def test_quarantine_is_byte_exact(logdir):
    bad = [b"{oops\r\n", b"\xc3\x28 bad utf8\n", line(rating(label="meh")), b'{"type": "r\n']
    data = line(rating()) + bad[0] + line(retouch()) + bad[1] + bad[2] + b"\n" + bad[3] + b"{ta"
    q = logdir / "q" / "quarantine.jsonl"
    s = validate_logs(write(logdir, data), quarantine=q)
    assert [x.line for x in s.invalid] == [2, 4, 5, 7, 8]
    assert q.read_bytes() == b"".join(bad) + b"{ta"  # the unterminated tail too, as it was
    assert s.quarantine == str(q)


def test_quarantine_never_merges_lines_across_files(logdir):
    a = write(logdir, line(rating()) + b"{bad\r\n" + b"{tail", "a.jsonl")
    b = write(logdir, b"{worse\n", "b.jsonl")
    sink = io.BytesIO()
    s = validate_logs([a, b], quarantine=sink)
    assert [(x.path, x.line) for x in s.invalid] == [(str(a), 2), (str(a), 3), (str(b), 1)]
    assert sink.getvalue() == b"{bad\r\n{tail\n{worse\n"  # a newline keeps them apart
    assert [f.to_dict()["lines"] for f in s.files] == [3, 1]
    s = validate_logs([a, b], quarantine=io.BytesIO(), follow=True)
    assert s.to_dict()["incomplete_tail"] == {str(a): 5}


def test_long_lines_are_streamed_and_quarantined(logdir):
    huge = b'{"type": "rating", "prompt": "' + b"x" * 5000 + b'"}\n'
    data = line(rating()) + huge + line(rating()) + b"y" * 3000  # and a long unterminated tail
    sink = io.BytesIO()
    s = validate_logs(write(logdir, data), quarantine=sink, max_line_bytes=1024)
    # a tail already over the limit is invalid whether or not its writer finishes it
    assert (s.total_lines, s.valid, s.invalid_count) == (4, 2, 2)
    assert [(x.line, x.reason) for x in s.invalid] == [
        (2, Reason.LINE_TOO_LONG),
        (4, Reason.LINE_TOO_LONG),
    ]
    assert sink.getvalue() == huge + b"y" * 3000
    # a line of exactly the limit (plus its ending) is fine
    exact = line(rating())
    assert validate_logs(write(logdir, exact), max_line_bytes=len(exact) - 1).valid == 1


def test_directory_expands_to_jsonl_files(logdir):
    (logdir / "day2").mkdir()
    write(logdir, line(rating()), "day1.jsonl")
    write(logdir, line(rating()) + line(retouch()), "day2/creator.jsonl")
    write(logdir, b"not a log", "notes.txt")
    s = validate_logs(logdir)
    assert len(s.files) == 2 and s.valid == 1  # day2's images are relative to day2/
    assert s.by_reason == {"missing_image": 2}
    assert validate_logs(logdir, check_images=False).valid == 3


def test_bad_paths_are_data_errors(logdir):
    with pytest.raises(DataError, match="no such log"):
        LogReader(logdir / "absent.jsonl")
    (logdir / "empty").mkdir()
    with pytest.raises(DataError, match=r"no \*\.jsonl"):
        LogReader(logdir / "empty")
    p = write(logdir, line(rating()))
    with pytest.raises(DataError, match="also an input"):
        LogReader(p, quarantine=p)


def test_quarantine_beside_the_logs_is_not_read_back(logdir):
    write(logdir, line(rating()) + b"{bad\n", "day1.jsonl")
    q = logdir / "quarantine.jsonl"
    for _ in range(2):  # the second run must not read the first run's quarantine
        s = validate_logs(logdir, quarantine=q)
        assert [f.path for f in s.files] == [str(logdir / "day1.jsonl")]
        assert q.read_bytes() == b"{bad\n"


def test_summary_keeps_a_bounded_invalid_list(logdir):
    p = write(logdir, b"{x\n" * 50)
    seen = []
    s = validate_logs(p, keep_invalid=10, on_invalid=seen.append)
    assert s.invalid_count == 50 and len(s.invalid) == 10 and s.invalid_not_kept == 40
    assert [x.line for x in seen] == list(range(1, 51))
    d = s.to_dict()
    assert (
        d["invalid"] == 50 and d["by_reason"] == {"bad_json": 50} and len(d["invalid_lines"]) == 10
    )


def test_synthetic_events_are_valid(logdir):
    rng = random.Random(0)
    images = image_pool(logdir, 4)
    kinds = ["selection", "route", "retouch", "rating"] * 50
    data = b"".join(
        line(make_event(k, rng, index=i, images=images, catalog=default_catalog()))
        for i, k in enumerate(kinds)
    )
    s = validate_logs(write(logdir, data))
    assert s.valid == 200, s.invalid[:3]


def test_symlinked_files_and_folders_are_read_alike_and_once(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.jsonl").write_bytes(line(rating()))
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "b.jsonl").write_bytes(line(rating()))
    (logs / "linked_dir").symlink_to(real, target_is_directory=True)  # read, not skipped
    (logs / "again.jsonl").symlink_to(logs / "b.jsonl")  # the same file: read once
    (real / "loop").symlink_to(logs, target_is_directory=True)  # a link loop ends
    s = validate_logs([logs, logs / "b.jsonl"], check_images=False)
    assert s.valid == 2 and len(s.files) == 2, [f.path for f in s.files]
