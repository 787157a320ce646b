"""Built-in plugin: the default engine catalog (DESIGN.md), registered like any plugin's.

Third-party plugins add engines through the same hook; their steps follow these in
catalog order (which fixes router token ids), so the defaults keep stable ids.
"""

from __future__ import annotations

from collections.abc import Callable

from studio_align.hookspecs import hookimpl
from studio_align.intents.catalog import DEFAULT_ENGINES, Engine


@hookimpl
def studio_align_register_engines(register: Callable[[Engine], None]) -> None:
    for engine in DEFAULT_ENGINES:
        register(engine)
