"""The ledger: the single source of truth of an autotune run.

`ledger.jsonl` is append-only, one event per line, flushed and fsynced as it is written:
`header`, `propose` (a trial's config, written before it runs), `run` (one seed of one
trial on one split, with the full metrics dict), `trial` (the decision), `confirm` (the
held-out check). A killed loop replays it: finished trials are never repeated, a proposed
but unfinished trial resumes with the same config and reuses the seeds that finished.

`results.tsv` is derived from the ledger after every trial (never edited by hand), so it
cannot drift from what happened. `GitRecorder` commits each kept config to a branch
through git plumbing (a private index file), leaving the user's HEAD, index and working
tree untouched.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from studio_align.errors import StudioAlignError
from studio_align.jsonsafe import json_safe
from studio_align.textfiles import read_text

LEDGER = "ledger.jsonl"
RESULTS = "results.tsv"
TSV_COLUMNS = ["trial", "metric", "status", "description", "diff", "seconds", "seeds", "std"]


class Ledger:
    """Append-only JSONL events in `out/ledger.jsonl`."""

    def __init__(self, out: str | Path) -> None:
        self.out = Path(out)
        self.path = self.out / LEDGER

    def exists(self) -> bool:
        return self.path.exists() and self.path.stat().st_size > 0

    def append(self, kind: str, **fields: Any) -> dict[str, Any]:
        record = {"kind": kind, "time": round(time.time(), 3), **fields}
        line = json.dumps(json_safe(record), sort_keys=False, allow_nan=False)
        self.out.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        return record

    def records(self) -> list[dict[str, Any]]:
        """All events; a torn last line (the loop killed mid-write) is dropped with a warning."""
        if not self.path.exists():
            return []
        lines = read_text(self.path, StudioAlignError).splitlines()
        out = []
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                if i == len(lines):
                    warnings.warn(f"{self.path}:{i}: dropping torn last line", stacklevel=2)
                    break
                raise StudioAlignError(f"{self.path}:{i}: corrupt ledger line: {e}") from e
            problem = _malformed(record)
            if problem:
                raise StudioAlignError(f"{self.path}:{i}: corrupt ledger line: {problem}")
            out.append(record)
        return out

    def of_kind(self, kind: str) -> Iterator[dict[str, Any]]:
        return (r for r in self.records() if r["kind"] == kind)


_NUMBER = (int, float)
_OPTIONAL_NUMBER = (int, float, type(None))
# the keys the loop reads back from each kind of event, and their JSON types
_FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "header": {"name": str, "metric": str, "direction": str},
    "propose": {"trial": int, "config": dict},
    "run": {"trial": int, "seed": int, "split": str, "status": str, "value": _OPTIONAL_NUMBER},
    "trial": {"trial": int, "status": str, "config": dict, "values": list, "seeds": list,
              "mean": _OPTIONAL_NUMBER, "std": _OPTIONAL_NUMBER},
    "confirm": {"trial": int, "seeds": list, "values": list},
}  # fmt: skip


def _malformed(record: Any) -> str:
    """What is wrong with one ledger event, or "" (the loop would fail on it much later)."""
    if not isinstance(record, dict):
        return f"an event is a JSON object, not {type(record).__name__}"
    kind = record.get("kind")
    if kind not in _FIELDS:
        return f"kind {kind!r} is not one of {', '.join(_FIELDS)}"
    for key, types in _FIELDS[kind].items():
        if key not in record:
            return f"a {kind} event without {key!r}"
        value = record[key]
        if isinstance(value, bool) or not isinstance(value, types):
            return f"{kind} {key!r} is {value!r}, of the wrong type"
    if kind in ("trial", "confirm"):
        numbers = [v for v in record["values"] if isinstance(v, bool) or not isinstance(v, _NUMBER)]
        if numbers:
            return f"{kind} values hold {numbers[0]!r}, not a number"
    return ""


def write_results_tsv(out: str | Path, trials: list[dict[str, Any]]) -> Path:
    """Rewrite `results.tsv` from the ledger's `trial` events (atomically)."""
    path = Path(out) / RESULTS
    rows = ["\t".join(TSV_COLUMNS)]
    for t in sorted(trials, key=lambda r: r["trial"]):
        mean, std = t.get("mean"), t.get("std")
        row = [
            str(t["trial"]),
            "" if mean is None else f"{mean:.6g}",
            t["status"],
            _cell(t.get("description", "")),
            _cell(t.get("diff", "")),
            f"{t.get('seconds', 0.0):.1f}",
            ",".join(str(s) for s in t.get("seeds", [])),
            "" if std is None else f"{std:.4g}",
        ]
        rows.append("\t".join(row))
    tmp = path.with_suffix(".tsv.tmp")
    tmp.write_text("\n".join(rows) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def _cell(text: str) -> str:
    return " ".join(str(text).split())  # no tabs or newlines inside a cell


class GitRecorder:
    """Commit kept configs to `branch` of the git repository at `repo`.

    The branch starts from the repository's current HEAD (or as an orphan in an empty
    repository). Uses a temporary index and `commit-tree`/`update-ref`, so the repository's checked
    out branch, index and working tree are never touched (the loop may run inside the
    very repository it records to)."""

    def __init__(self, repo: str | Path, branch: str, subdir: str = "autotune") -> None:
        self.repo = Path(repo).resolve()
        self.branch = branch
        self.subdir = subdir.strip("/")
        top = self._git("rev-parse", "--show-toplevel", check=False)
        if top is None:
            raise StudioAlignError(f"--git: {self.repo} is not inside a git repository")
        self.repo = Path(top)

    def _git(
        self,
        *args: str,
        input: str | None = None,
        env: dict[str, str] | None = None,
        check: bool = True,
    ) -> str | None:
        full_env = {
            **os.environ,
            "GIT_AUTHOR_NAME": os.environ.get("GIT_AUTHOR_NAME", "studio-align autotune"),
            "GIT_AUTHOR_EMAIL": os.environ.get("GIT_AUTHOR_EMAIL", "autotune@studio-align"),
            "GIT_COMMITTER_NAME": os.environ.get("GIT_COMMITTER_NAME", "studio-align autotune"),
            "GIT_COMMITTER_EMAIL": os.environ.get("GIT_COMMITTER_EMAIL", "autotune@studio-align"),
            **(env or {}),
        }
        proc = subprocess.run(
            ["git", "-C", str(self.repo), *args],
            input=input,
            capture_output=True,
            text=True,
            env=full_env,
        )
        if proc.returncode != 0:
            if not check:
                return None
            raise StudioAlignError(f"--git: git {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout.strip()

    def head(self) -> str | None:
        return self._git(
            "rev-parse", "--verify", "--quiet", f"refs/heads/{self.branch}^{{commit}}", check=False
        )

    def commit(self, files: dict[str, str], message: str) -> str:
        """Commit `files` (name -> text, under `subdir`) on top of the branch; returns the sha."""
        parent = self.head()
        ref_parent = parent  # what update-ref expects the branch to point at now
        if parent is None:  # a new branch starts from the checked-out commit, if any
            parent = self._git("rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
        with tempfile.TemporaryDirectory() as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            if parent:
                self._git("read-tree", parent, env=env)
            for name, text in files.items():
                blob = self._git("hash-object", "-w", "--stdin", input=text)
                assert blob
                path = f"{self.subdir}/{name}" if self.subdir else name
                self._git("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
            tree = self._git("write-tree", env=env)
        assert tree
        args = ["commit-tree", tree, "-m", message]
        if parent:
            args += ["-p", parent]
        sha = self._git(*args)
        assert sha
        self._git("update-ref", f"refs/heads/{self.branch}", sha, ref_parent or "")
        return sha
