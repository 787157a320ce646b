"""Plugins: the host (discovery, validated registration, hook calls).

Built-in plugins live in the product they adapt (`router/plugin.py`,
`reward_models/plugin.py`, `verticals/grading/plugin.py`, `verticals/flow/plugin.py`)
plus the engine catalog here
(`plugins/catalog.py`); all are declared as studio-align's own entry points in group
`studio_align`, exactly as a third party declares its plugin, so the host never imports a
product. Everything callers need is re-exported here.
"""

from __future__ import annotations

from studio_align.hookspecs import Encoder, EncoderSpec, hookimpl
from studio_align.plugins.default import get_host, set_host, using_host
from studio_align.plugins.host import BLOCK_ENV_VAR, ENV_VAR, ORIGINS, PluginHost, PluginInfo
from studio_align.rewards import Reward
from studio_align.tasks import StartingPoint, Task, TaskSpec

__all__ = [
    "BLOCK_ENV_VAR",
    "ENV_VAR",
    "ORIGINS",
    "Encoder",
    "EncoderSpec",
    "PluginHost",
    "PluginInfo",
    "Reward",
    "StartingPoint",
    "Task",
    "TaskSpec",
    "get_host",
    "hookimpl",
    "set_host",
    "using_host",
]
