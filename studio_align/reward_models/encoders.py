"""Resolve an encoder by name: through the plugin host, so plugin encoders work too."""

from __future__ import annotations

from typing import Any

from studio_align.errors import ConfigError, PluginError
from studio_align.plugins import get_host


def make_encoder(name: str, options: dict[str, Any] | None = None, *, host: Any = None) -> Any:
    """Build encoder `name` with `options` from the host's registered encoders."""
    if host is None:
        host = get_host()
    specs = host.encoders
    if name not in specs:
        raise ConfigError(
            f"encoder.name: unknown encoder {name!r}; registered: {', '.join(sorted(specs)) or 'none'}"
        )
    try:
        return specs[name].factory(**(options or {}))
    except TypeError as e:
        raise ConfigError(f"encoder.options for {name!r}: {e}") from e
    except PluginError:
        raise
