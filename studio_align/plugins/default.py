"""The process-wide plugin host: built once on first use, swappable for tests.

Nothing else is global: a test builds a fresh `PluginHost`, makes it the default inside
`using_host(...)` and throws it away.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from studio_align.plugins.host import PluginHost

_default: PluginHost | None = None
_lock = threading.Lock()


def get_host() -> PluginHost:
    """The process-wide host (builtins + entry points + `STUDIO_ALIGN_PLUGINS`), built once."""
    global _default
    with _lock:
        if _default is None:
            _default = PluginHost.default()
        return _default


def set_host(host: PluginHost | None) -> PluginHost | None:
    """Replace the process default (None: rebuild on next `get_host()`); returns the old one."""
    global _default
    with _lock:
        previous, _default = _default, host
        return previous


@contextlib.contextmanager
def using_host(host: PluginHost | None) -> Iterator[PluginHost | None]:
    """Make `host` the process default inside the block, restoring the previous after."""
    previous = set_host(host)
    try:
        yield host
    finally:
        set_host(previous)
