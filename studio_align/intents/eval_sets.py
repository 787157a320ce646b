"""Evaluation sets that ship with the package (so a non-editable install reports them).

Each is a JSONL of labelled routing examples under `intents/eval/`; they were written by
hand, before any setting was tuned, and are never used to choose settings.
"""

from __future__ import annotations

from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

from studio_align.intents.demo import read_examples

EVAL_PACKAGE = "studio_align.intents"


def eval_set_names() -> list[str]:
    """Names of the shipped sets (file stems)."""
    folder = files(EVAL_PACKAGE) / "eval"
    return sorted(p.name[: -len(".jsonl")] for p in folder.iterdir() if p.name.endswith(".jsonl"))


def eval_set_path(name: str) -> Path:
    """Filesystem path of a shipped set (package data is a plain file in every install)."""
    with as_file(files(EVAL_PACKAGE) / "eval" / f"{name}.jsonl") as p:
        return Path(p)


def load_eval_set(name: str) -> list[dict[str, Any]]:
    """The labelled examples of a shipped set."""
    return read_examples(eval_set_path(name))
