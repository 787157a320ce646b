"""`LogReader.run()` (validate only, no event objects) decides every line as iteration does.

The validate-only path answers "fits" from msgspec structs and builds a pydantic event
only for lines it cannot pass, so the two paths must agree on every count, reason,
detail and quarantined byte: on generated logs, hand-made invalid lines of every kind
(schema and context), and random byte mutations.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
from data_events import line, rating, retouch, route, selection

from studio_align.data.reader import LogReader
from studio_align.testing.synth import image_pool, synthetic_lines


def _both(paths: list[Path], **options) -> tuple:
    """(summary, quarantine bytes) from iteration, then from `run()`."""
    out = []
    for validate_only in (False, True):
        sink = io.BytesIO()
        reader = LogReader(paths, quarantine=sink, **options)
        if validate_only:
            reader.run()
        else:
            for _ in reader:
                pass
        s = reader.summary
        out.append(
            (
                (s.total_lines, s.valid, s.invalid_count, s.blank),
                dict(s.by_type),
                {str(k): v for k, v in s.by_reason.items()},
                [(x.path, x.line, x.reason, x.detail) for x in s.invalid],
                [(f.path, f.lines, f.valid, f.invalid, f.blank) for f in s.files],
                sink.getvalue(),
            )
        )
    return out[0], out[1]


CONTEXT_LINES = [
    line(route(proposed=["wan.teleport"])),  # unknown step
    line(route(final=["wan.image_to_video", "audio.karaoke"])),
    line(route(request={"text": "x", "attachments": []}, outcome="accepted", final=None)),
    line(route(request={"text": "x"}, proposed=["audio.music"], final=["wan.image_to_video"])),
    line(route(outcome="abandoned", final=None, proposed=["wan.image_to_video"])),
    line(selection(candidates=[{"id": "a", "image": "img/p0.png"}, {"id": "b", "image": "x.png"}])),
    line(retouch(image="elsewhere/x.png")),
    line(rating(image="../outside.png")),
    line(rating(image="img")),  # a directory
    line(rating()),
    line(retouch()),
    line(selection()),
    line(route()),
]


def test_context_and_schema_errors_agree(tmp_path):
    image_pool(tmp_path, 8)
    mixed = b"".join(CONTEXT_LINES * 2) + b"\n  \n" + b"not json\n" + line(rating(ts="yesterday"))
    log = tmp_path / "log.jsonl"
    log.write_bytes(mixed + CONTEXT_LINES[0])
    it, run = _both([log])
    assert it == run
    assert it[0][2] > 10 and it[0][1] >= 8  # both kinds of lines are really there


def test_generated_and_mutated_logs_agree(tmp_path):
    images = image_pool(tmp_path, 8)
    rng = random.Random(1)
    good = list(synthetic_lines(1500, seed=5, images=images))
    lines = []
    for raw in good:
        if rng.random() < 0.3:  # 1-3 byte mutations, as in test_data_fastdecode
            b = bytearray(raw)
            for _ in range(rng.randint(1, 3)):
                i = rng.randrange(len(b) - 1)
                b[i] = rng.choice(b'"{}[],:0123456789.eE+-ntfaulrsZz \\')
            raw = bytes(b)
        lines.append(raw)
    (tmp_path / "a.jsonl").write_bytes(b"".join(lines[:700]))
    (tmp_path / "b.jsonl").write_bytes(b"".join(lines[700:]))
    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    for check_images in (True, False):
        it, run = _both(paths, check_images=check_images)
        assert it == run
        assert it[0][1] > 900 and it[0][2] > 100


def test_run_reads_once_and_returns_the_summary(tmp_path):
    image_pool(tmp_path, 8)
    log = tmp_path / "log.jsonl"
    log.write_bytes(line(rating()) + json.dumps({"type": "rating"}).encode() + b"\n")
    reader = LogReader(log)
    summary = reader.run()
    assert summary is reader.summary and (summary.valid, summary.invalid_count) == (1, 1)
    with pytest.raises(RuntimeError, match="once"):
        reader.run()
