"""Issue 13, defects 5, 6 and 10 and the 8 MiB line: the log reader loses nothing,
destroys nothing and opens nothing outside its roots."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from data_events import line, rating, route

from studio_align.data.reader import DEFAULT_MAX_LINE_BYTES, LogReader, validate_logs
from studio_align.errors import DataError
from studio_align.testing.synth import image_pool


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    image_pool(tmp_path, 4)
    return tmp_path


# -- 5. quarantine never overwrites an input -----------------------------------------------------


@pytest.mark.parametrize("kind", ["hard link", "symlink", "same path", "symlinked folder"])
def test_quarantine_sharing_an_inode_with_an_input_is_refused(logdir: Path, kind: str) -> None:
    log = logdir / "h.jsonl"
    data = line(rating(image="img/p0.png")) * 5 + b"{bad line\n"
    log.write_bytes(data)
    q = logdir / "q" / "h.q"
    q.parent.mkdir()
    if kind == "hard link":
        os.link(log, q)
    elif kind == "symlink":
        q.symlink_to(log)
    elif kind == "same path":
        q = log
    else:
        (logdir / "alias").symlink_to(logdir, target_is_directory=True)
        q = logdir / "alias" / "h.jsonl"
    with pytest.raises(DataError, match="input log"):
        validate_logs(log, quarantine=q)
    assert log.read_bytes() == data  # not a byte lost
    ok = validate_logs(log, quarantine=logdir / "elsewhere.jsonl")
    assert ok.valid == 5 and (logdir / "elsewhere.jsonl").read_bytes() == b"{bad line\n"


# -- 6. a log read while a writer appends -------------------------------------------------------


def _appender(path: Path, n: int, done: threading.Event) -> None:
    """Append `n` route events, each in two write() calls with a pause between them."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for i in range(n):
            raw = line(route(id=f"e{i}", creator=f"c{i % 7}"))
            cut = len(raw) // 2
            os.write(fd, raw[:cut])
            time.sleep(0.0005)  # the reader may look now: half a line is in the file
            os.write(fd, raw[cut:])
    finally:
        os.close(fd)
        done.set()


def test_appender_race_gives_no_false_invalid_lines(tmp_path: Path) -> None:
    runs, reads, tails = 10, 0, 0
    for run in range(runs):
        path = tmp_path / f"growing{run}.jsonl"
        path.touch()
        done = threading.Event()
        writer = threading.Thread(target=_appender, args=(path, 150, done))
        writer.start()
        while not done.is_set():
            s = validate_logs(path, check_images=False, follow=True)  # a live follower
            reads += 1
            tails += bool(s.files[0].incomplete_tail)
            assert s.invalid_count == 0, s.invalid[:3]  # never a torn fragment
        writer.join()
        final = validate_logs(path, check_images=False)
        assert (final.valid, final.invalid_count, final.files[0].incomplete_tail) == (150, 0, 0)
    assert reads >= runs  # the reader did read while the writer wrote
    print(f"appender race: {runs} runs, {reads} concurrent reads, {tails} saw a partial line")


# -- 10. image paths are confined ------------------------------------------------------------------


def test_image_paths_outside_the_logs_folder_are_invalid(logdir: Path, tmp_path_factory) -> None:
    outside = tmp_path_factory.mktemp("outside")
    secret = outside / "secret.png"
    secret.write_bytes(b"png")
    (logdir / "img" / "escape.png").symlink_to(secret)
    bad = [str(secret), "../" + outside.name + "/secret.png", "img/escape.png", "/etc/shadow"]
    log = logdir / "log.jsonl"
    log.write_bytes(b"".join(line(rating(image=p)) for p in bad) + line(rating(image="img/p1.png")))
    s = validate_logs(log, check_images=False)  # confinement holds even without image checks
    assert s.valid == 1 and s.by_reason == {"image_outside_root": len(bad)}
    assert all("resolves outside" in x.detail for x in s.invalid)
    # a configured images_root admits what lies under it (and only that)
    s = validate_logs(log, images_root=outside)
    assert s.valid == 4 and s.by_reason == {"image_outside_root": 1}  # /etc/shadow
    assert validate_logs(log, allow_external_images=True, check_images=False).valid == 5


# -- smaller: a line of exactly the limit --------------------------------------------------------


@pytest.mark.parametrize("ending", [b"\n", b"\r\n"])
def test_a_line_of_exactly_8_mib_plus_its_newline_is_accepted(logdir: Path, ending: bytes) -> None:
    event = rating(prompt="")
    base = len(json.dumps(event).encode())
    event["prompt"] = "p" * (DEFAULT_MAX_LINE_BYTES - base)
    raw = json.dumps(event).encode()
    assert len(raw) == DEFAULT_MAX_LINE_BYTES
    log = logdir / "big.jsonl"
    log.write_bytes(raw + ending + raw + b"x" + ending)
    reader = LogReader(log, check_images=False)
    assert [e.line for e in reader] == [1]
    assert [(x.line, x.reason) for x in reader.summary.invalid] == [(2, "line_too_long")]


def test_a_refused_compile_leaves_no_empty_output_folder(logdir: Path) -> None:
    from studio_align.data.compile import InvalidLogError, compile_logs

    log = logdir / "bad.jsonl"
    log.write_bytes(b"{bad\n")
    with pytest.raises(InvalidLogError):
        compile_logs([log], logdir / "out" / "deeper", check_images=False)
    assert not (logdir / "out" / "deeper").exists()
