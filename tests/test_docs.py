"""The command blocks of README.md and docs/*.md that are marked as tested, run as written.

A fenced ```bash block right after a `<!-- test -->` line runs in the default suite; one
after `<!-- test: slow -->` runs only under `-m slow`. Options, comma-separated after
`test:`: `slow`; `background` (started, left running for the blocks after it, killed at
the end: a server); `timeout=S` (default 300 s for a quick block, 3600 s for a slow one).

Design choices:
- All marked blocks of one file run **in order, in one fresh temporary directory**, as a
  reader would type them: a later block may use what an earlier one wrote. The quick
  test runs a file's quick blocks only, so those must stand alone; the slow test runs
  every marked block of the file.
- `studio-align` is a shim onto this interpreter and this checkout (`python -m
  studio_align.cli`), so the docs are tested against the code beside them, not whatever
  is installed. Install commands are stubbed: a `python3 -m venv .venv` makes a `.venv/bin`
  of shims and `pip install` there does nothing, so the README's first line (install +
  quickstart) runs as written, on the package under test.
- Each block runs under `bash -euo pipefail` with a timeout, so a failing or hanging
  command fails the test naming the file, the block's line and its output tail.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!--\s*test(?::\s*(?P<opts>[^>]*?))?\s*-->\s*$")
OPTIONS = {"slow", "background"}


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    code: str
    slow: bool
    background: bool
    timeout: float

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def parse_blocks(path: Path) -> list[Block]:
    """The marked blocks of a Markdown file; a malformed marker is an error naming its line."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    for i, text in enumerate(lines):
        m = MARKER.match(text.strip())
        if not m:
            continue
        opts = [o.strip() for o in (m["opts"] or "").split(",") if o.strip()]
        timeout = None
        for o in opts:
            if o.startswith("timeout="):
                timeout = float(o.split("=", 1)[1])
            elif o not in OPTIONS:
                raise ValueError(f"{path}:{i + 1}: unknown test option {o!r}")
        j = i + 1
        if j >= len(lines) or not re.match(r"^```(bash|sh)\s*$", lines[j].strip()):
            raise ValueError(f"{path}:{i + 1}: a test marker must be followed by a ```bash block")
        end = next((k for k in range(j + 1, len(lines)) if lines[k].strip() == "```"), None)
        if end is None:
            raise ValueError(f"{path}:{j + 1}: unterminated code block")
        slow = "slow" in opts
        blocks.append(
            Block(
                path=path,
                line=j + 1,
                code="\n".join(lines[j + 1 : end]) + "\n",
                slow=slow,
                background="background" in opts,
                timeout=timeout or (3600.0 if slow else 300.0),
            )
        )
    return blocks


# -- the sandbox ---------------------------------------------------------------------------------

SHIM = """#!/bin/sh
exec "{python}" -m studio_align.cli "$@"
"""
PYTHON3_SHIM = """#!/bin/sh
# `python3 -m venv DIR`: a directory of shims onto the interpreter under test
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
    mkdir -p "$3/bin" && cp "{bin}/studio-align" "{bin}/pip" "$3/bin/"
    ln -sf "{python}" "$3/bin/python"
    exit 0
fi
exec "{python}" "$@"
"""
PIP_SHIM = """#!/bin/sh
echo "(docs test: pip $* skipped; testing the checkout at {root})"
"""


def sandbox(tmp: Path) -> dict[str, str]:
    """Shims for `studio-align`, `python3 -m venv` and `pip`; the environment to run blocks in."""
    bin_dir = tmp / ".shims"
    bin_dir.mkdir()
    fill = {"python": sys.executable, "bin": str(bin_dir), "root": str(ROOT)}
    for name, text in (("studio-align", SHIM), ("python3", PYTHON3_SHIM), ("pip", PIP_SHIM)):
        p = bin_dir / name
        p.write_text(text.format(**fill), encoding="utf-8")
        p.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.pop("STUDIO_ALIGN_PLUGINS", None)
    return env


def run_blocks(blocks: list[Block], cwd: Path) -> None:
    env = sandbox(cwd)
    background: list[subprocess.Popen[bytes]] = []
    try:
        for b in blocks:
            argv = ["bash", "-euo", "pipefail", "-c", b.code]
            if b.background:
                log = (cwd / f"background-{b.line}.log").open("wb")
                background.append(
                    subprocess.Popen(
                        argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )  # fmt: skip
                continue
            try:
                res = subprocess.run(
                    argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=b.timeout
                )
            except subprocess.TimeoutExpired:
                pytest.fail(f"{b.where()}: block ran past {b.timeout:.0f}s")
            if res.returncode != 0:
                tail = (res.stdout + res.stderr)[-3000:]
                pytest.fail(f"{b.where()}: exit {res.returncode}\n{tail}")
            for p in background:  # a server that died is a failure too, not a later mystery
                if p.poll() is not None:
                    pytest.fail(f"a background block of {b.path.name} exited with {p.returncode}")
    finally:
        for p in background:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()


# -- tests ---------------------------------------------------------------------------------------

ALL = {p: parse_blocks(p) for p in DOCS}
QUICK = [p for p, bs in ALL.items() if any(not b.slow for b in bs)]
ANY = [p for p, bs in ALL.items() if bs]


def _id(p: Path) -> str:
    return str(p.relative_to(ROOT))


def test_markers_parse_and_the_readme_is_tested():
    assert any(b.slow for b in ALL[ROOT / "README.md"]), "README has no tested blocks"
    assert QUICK, "no quick tested block anywhere"


def test_parser_rejects_a_marker_without_a_block(tmp_path):
    bad = tmp_path / "x.md"
    bad.write_text("<!-- test -->\nno block here\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"x.md:1: a test marker must be followed"):
        parse_blocks(bad)
    bad.write_text("<!-- test: fast -->\n```bash\ntrue\n```\n", encoding="utf-8")
    with pytest.raises(ValueError, match="unknown test option 'fast'"):
        parse_blocks(bad)


@pytest.mark.parametrize("path", QUICK, ids=_id)
def test_quick_blocks(path: Path, tmp_path: Path):
    run_blocks([b for b in ALL[path] if not b.slow], tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("curl") is None, reason="the README's blocks use curl")
@pytest.mark.parametrize("path", ANY, ids=_id)
def test_every_marked_block_in_order(path: Path, tmp_path: Path):
    run_blocks(ALL[path], tmp_path)
