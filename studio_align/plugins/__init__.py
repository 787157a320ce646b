"""Plugins: the host (discovery, validation, hook calls) and the built-in plugins.

Built-in plugins are ordinary plugin modules listed in `BUILTIN_PLUGINS`; the host
registers them through the very same hooks as third-party ones (origin `builtin`).
To add one, write `studio_align/plugins/<name>.py` with `studio_align_*` hook functions
and append its module name here.

The host lives in `host.py` (a module `studio_align/plugins.py` cannot sit beside this
package); everything callers need is re-exported here.
"""

from __future__ import annotations

BUILTIN_PLUGINS: list[str] = [
    "studio_align.plugins.catalog",
    "studio_align.plugins.routing",
    "studio_align.plugins.aesthetics",
    "studio_align.plugins.encoders",
]

from studio_align.hookspecs import Encoder, EncoderSpec, hookimpl  # noqa: E402
from studio_align.plugins.host import (  # noqa: E402
    BLOCK_ENV_VAR,
    ENV_VAR,
    ORIGINS,
    PluginHost,
    PluginInfo,
    get_host,
    set_host,
    using_host,
)
from studio_align.rewards import Reward, RewardScores, score_batch  # noqa: E402

__all__ = [
    "BLOCK_ENV_VAR",
    "BUILTIN_PLUGINS",
    "ENV_VAR",
    "ORIGINS",
    "Encoder",
    "EncoderSpec",
    "PluginHost",
    "PluginInfo",
    "Reward",
    "RewardScores",
    "get_host",
    "hookimpl",
    "score_batch",
    "set_host",
    "using_host",
]
