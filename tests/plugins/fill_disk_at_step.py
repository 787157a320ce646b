"""Test plugin: fill the disk holding `FILL_DIR` right after the checkpoint of step
`FILL_AT_STEP`, so the run's next write fails with ENOSPC (a real full disk, mid-run).

Loaded through `STUDIO_ALIGN_PLUGINS` by `tests/test_full_disk_resume.py`; the filler is
`FILL_DIR/filler`, which the test deletes to free the space before resuming.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def studio_align_on_checkpoint(run: str, step: int, directory: str) -> None:
    if step != int(os.environ.get("FILL_AT_STEP", "-1")):
        return
    filler = Path(os.environ["FILL_DIR"]) / "filler"
    with filler.open("ab", buffering=0) as f:
        for chunk in (1 << 16, 1 << 12, 1):  # big writes, then down to the last byte
            with contextlib.suppress(OSError):
                while f.write(b"\0" * chunk):
                    pass
