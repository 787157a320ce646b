"""Test plugin: SIGKILL this process right after the checkpoint of step `KILL_AT_STEP`.

Loaded through `STUDIO_ALIGN_PLUGINS` by the resume tests, so production code carries no
test knob: the kill rides on the public `studio_align_on_checkpoint` hook, which fires
once the checkpoint is on disk.
"""

from __future__ import annotations

import os
import signal


def studio_align_on_checkpoint(run: str, step: int, directory: str) -> None:
    if step == int(os.environ.get("KILL_AT_STEP", "-1")):
        os.kill(os.getpid(), signal.SIGKILL)
