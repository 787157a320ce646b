"""Creator-log events of DESIGN.md as builders, shared by the data tests."""

from __future__ import annotations

import json


def selection(**over):
    e = {
        "type": "selection",
        "id": "e1",
        "ts": "2026-11-01T10:00:00Z",
        "creator": "c42",
        "session": "s9",
        "prompt": "rainy neon street, cinematic",
        "candidates": [
            {"id": "a", "image": "img/p0.png"},
            {"id": "b", "image": "img/p1.png"},
            {"id": "c", "image": "img/p2.png"},
        ],
        "chosen": ["b"],
    }
    return e | over


def route(**over):
    e = {
        "type": "route",
        "id": "e2",
        "ts": "2026-11-01T10:01:00Z",
        "creator": "c42",
        "session": "s9",
        "request": {"text": "把这张图做成10秒的视频并配乐", "attachments": ["image"]},
        "proposed": ["wan.image_to_video"],
        "final": ["wan.image_to_video", "audio.music"],
        "outcome": "rerouted",
    }
    return e | over


def retouch(**over):
    e = {
        "type": "retouch",
        "id": "e3",
        "ts": "2026-11-01T10:02:00Z",
        "creator": "c42",
        "image": "img/p3.png",
        "before": {"exposure": 0.0, "contrast": 0.0},
        "after": {"exposure": 0.2, "contrast": 0.15},
    }
    return e | over


def rating(**over):
    e = {
        "type": "rating",
        "id": "e4",
        "ts": "2026-11-01T10:03:00Z",
        "creator": "c42",
        "prompt": "…",
        "image": "img/p4.png",
        "label": "down",
    }
    return e | over


def line(obj) -> bytes:
    return (json.dumps(obj, ensure_ascii=False) + "\n").encode()
