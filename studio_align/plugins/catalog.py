"""Built-in plugin: the engine catalog, registered like any plugin's.

The default is `engines.toml` (docs/design.md's table); `STUDIO_ALIGN_CATALOG=FILE`
names a platform's own catalog file of the same shape instead.

Third-party plugins add engines through the same hook; their steps follow these in
catalog order (which fixes router token ids), so the defaults keep stable ids.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from studio_align.catalog import DEFAULT_ENGINES, Engine, load_engines
from studio_align.hookspecs import hookimpl

CATALOG_ENV = "STUDIO_ALIGN_CATALOG"


@hookimpl
def studio_align_register_engines(register: Callable[[Engine], None]) -> None:
    path = os.environ.get(CATALOG_ENV)
    for engine in load_engines(Path(path)) if path else DEFAULT_ENGINES:
        register(engine)
