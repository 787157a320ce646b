"""`distill.teacher_kind` chooses the teacher: the task's own (`task`, the router's
checkpoint or ensemble teacher) or any checkpoint of the student's kind scored by the
student's policy (`policy`, `PolicyTeacher`); an unknown kind is one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import add_tiny_router, make_route_workspace

from studio_align.cli import main
from studio_align.config import validate
from studio_align.errors import ConfigError
from studio_align.training.distill_config import DistillRunConfig


def test_an_unknown_teacher_kind_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"distill\.teacher_kind: .*'task' or 'policy'"):
        validate(DistillRunConfig, {"distill": {"teacher_kind": "oracle"}})
    res = CliRunner().invoke(main, ["train", "distill", "--set", "distill.teacher_kind=oracle"])
    assert res.exit_code == 2 and "distill.teacher_kind" in res.output
    assert len([ln for ln in res.output.splitlines() if ln.strip()]) == 1


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = make_route_workspace(tmp_path_factory.mktemp("teacher-kind"), train_creators=4)
    add_tiny_router(ws, "teacher", seed=1)
    add_tiny_router(ws, "other", seed=2, vocab_size=300)
    return ws


def _distill(ws: Path, run: str, teacher: str) -> list[str]:
    sets = {
        "run_dir": ws / run, "model.init_from": ws / "router", "data.dir": ws / "compiled",
        "distill.teacher": ws / teacher, "distill.teacher_kind": "policy", "train.steps": 2,
        "train.batch_size": 4, "checkpoint.every": 0, "train.progress": "false",
    }  # fmt: skip
    return ["train", "distill", *[a for k, v in sets.items() for a in ("--set", f"{k}={v}")]]


@pytest.mark.slow  # trains a tiny router student for two steps through the CLI
def test_policy_teacher_scores_the_whole_vocabulary(workspace: Path) -> None:
    res = CliRunner().invoke(main, [*_distill(workspace, "run", "teacher"), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout[res.stdout.index("{") :])
    assert out["steps"] == 2 and out["teacher_cache_hit"] is False
    cache = np.load(workspace / "run" / "teacher_cache.npz")
    vocab = json.loads((workspace / "router" / "tokenizer.json").read_text())["model"]["vocab"]
    assert cache["ids"].shape[-1] == len(vocab)  # K = the vocabulary: a PolicyTeacher
    bad = CliRunner().invoke(main, _distill(workspace, "bad", "other"))
    assert bad.exit_code == 2 and 'teacher_kind = "task" maps other tokenizers' in bad.output
