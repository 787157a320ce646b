"""Path safety for the log reader: quarantine targets and image confinement.

Design choices:

* A quarantine file is compared with every input by device and inode (symlinks
  followed) and by real path (a dangling symlink would create its target), so a hard
  link, a symlink or the same path is refused before anything is truncated.
* An image is confined when its real path (every symlink resolved) lies inside one of
  the given roots; a string prefix test on real paths with a trailing separator, so
  `/logs-evil` is not inside `/logs`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from studio_align.errors import DataError


def _identity(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    try:
        st = os.stat(path)  # follows symlinks
    except OSError:
        return None
    return st.st_dev, st.st_ino


def check_quarantine_target(quarantine: str | os.PathLike[str], inputs: Iterable[Path]) -> None:
    """Refuse a quarantine path that is an input or shares its inode (hard link, symlink)."""
    target = _identity(quarantine)
    real = os.path.realpath(quarantine)  # a dangling symlink would create its target
    for p in inputs:
        if (target is not None and target == _identity(p)) or real == os.path.realpath(p):
            raise DataError(
                f"quarantine file {quarantine} is the input log {p} (same file, hard link or "
                "symlink); writing it would destroy the input: choose another path"
            )


def confined(path: str, roots: tuple[str, ...]) -> bool:
    """Whether `path`, symlinks resolved, lies inside one of `roots` (resolved folders)."""
    real = os.path.realpath(path)
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def _walk_logs(root: Path) -> list[Path]:
    """`*.jsonl` files under `root`, symlinked folders followed like real ones (each real
    folder once, so a link loop ends), sorted."""
    found: list[Path] = []
    seen_dirs: set[str] = set()
    for d, dirs, files in os.walk(root, followlinks=True):
        real = os.path.realpath(d)
        if real in seen_dirs:
            dirs[:] = []
            continue
        seen_dirs.add(real)
        dirs.sort()
        found.extend(Path(d) / f for f in files if f.endswith(".jsonl"))
    return sorted(q for q in found if q.is_file())


def expand_log_paths(
    paths: Iterable[str | os.PathLike[str]], *, exclude: str | os.PathLike[str] | None = None
) -> list[Path]:
    """Files as given; a directory stands for its `*.jsonl` files (recursive, sorted).

    Symlinks are treated alike whether they name a file or a folder (followed), and each
    file is read once: a second path to the same file (a symlink, a hard link, a folder
    given twice) is left out. `exclude` (the quarantine file) is left out of
    directories, so a quarantine kept beside the logs is not read back as a log on the
    next run; naming it explicitly as a log is an error.
    """
    skip = Path(exclude).resolve() if exclude is not None else None
    out: list[Path] = []
    seen: set[tuple[int, int]] = set()

    def add(q: Path) -> None:
        key = _identity(q)
        if key is not None and key in seen:
            return
        if key is not None:
            seen.add(key)
        out.append(q)

    for p in map(Path, paths):
        if p.is_dir():
            found = [q for q in _walk_logs(p) if q.resolve() != skip]
            if not found:
                raise DataError(f"{p}: directory holds no *.jsonl log files")
            for q in found:
                add(q)
        elif p.is_file():
            if p.resolve() == skip:
                raise DataError(f"quarantine file {exclude} is also an input log")
            add(p)
        else:
            raise DataError(f"{p}: no such log file or directory")
    if not out:
        raise DataError("no log files given")
    return out
