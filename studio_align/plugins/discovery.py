"""Plugin discovery: modules, files, `STUDIO_ALIGN_PLUGINS` and entry points.

Design choices:
- Built-in plugins are studio-align's own entry points (group `studio_align`), declared in
  its `pyproject.toml` like any third party's, with origin `builtin`; the host imports no
  product module by name.
- A file plugin is executed under a module name derived from its resolved path, so
  loading it twice is a no-op and two files with one stem do not collide.
- Every failure names the plugin and its origin (and how to skip it).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import Any

from studio_align.errors import PluginError
from studio_align.hookspecs import PROJECT

ENV_VAR = "STUDIO_ALIGN_PLUGINS"
BLOCK_ENV_VAR = "STUDIO_ALIGN_BLOCK_PLUGINS"
ENTRY_POINT_GROUP = PROJECT
OWN_DISTRIBUTION = "studio-align"


def _is_own(dist: Any) -> bool:
    name = getattr(dist, "name", None) or ""
    return name.replace("_", "-").lower() == OWN_DISTRIBUTION


class Discovery:
    """Loading methods of `PluginHost` (which supplies `register` and `blocked`)."""

    blocked: set[str]

    def register(self, plugin: Any, name: str | None = None, *, origin: str = "manual",
                 source: str = "") -> str:  # fmt: skip
        raise NotImplementedError

    def load_module(self, module: str, *, origin: str = "module") -> str:
        """Import `module` and register it as a plugin named after it."""
        if module in self.blocked:
            return module
        try:
            mod = importlib.import_module(module)
        except Exception as e:
            raise PluginError(
                f"plugin {module!r} ({origin}): import failed: {type(e).__name__}: {e}"
            ) from e
        return self.register(mod, name=module, origin=origin, source=module)

    def load_file(self, path: str | Path, *, origin: str = "file") -> str:
        """Execute a `.py` file as a module and register it, named after the file."""
        p = Path(path).expanduser().resolve()
        if p.stem in self.blocked:
            return p.stem
        if not p.is_file():
            raise PluginError(f"plugin file {str(path)!r} ({origin}): not found")
        digest = hashlib.sha1(str(p).encode()).hexdigest()[:10]
        stem = re.sub(r"\W", "_", p.stem)
        modname = f"_studio_align_plugin_{stem}_{digest}"
        mod = sys.modules.get(modname)
        if mod is None:
            spec = importlib.util.spec_from_file_location(modname, p)
            if spec is None or spec.loader is None:
                raise PluginError(f"plugin file {str(p)!r} ({origin}): cannot be loaded as Python")
            mod = importlib.util.module_from_spec(spec)
            sys.modules[modname] = mod
            try:
                spec.loader.exec_module(mod)
            except Exception as e:
                del sys.modules[modname]
                raise PluginError(
                    f"plugin {p.stem!r} (file {p}): import failed: {type(e).__name__}: {e}"
                ) from e
        return self.register(mod, name=p.stem, origin=origin, source=str(p))

    def load(self, spec: str, *, origin: str | None = None) -> str:
        """Load a module name or a `.py` file path (what `--plugin` takes)."""
        spec = spec.strip()
        if spec.endswith(".py") or os.sep in spec or "/" in spec:
            return self.load_file(spec, origin=origin or "file")
        return self.load_module(spec, origin=origin or "module")

    def load_env(self, value: str | None = None) -> list[str]:
        """Load the comma-separated modules/files of `STUDIO_ALIGN_PLUGINS` (or `value`)."""
        value = os.environ.get(ENV_VAR, "") if value is None else value
        return [self.load(s, origin="env") for s in value.split(",") if s.strip()]

    def load_builtins(self) -> list[str]:
        """Register the built-in plugins: the entry points of studio-align itself.

        The product packages declare their plugins in the distribution's own entry
        points, exactly as a third party does, so the host never imports a product.
        """
        return self._load_group(ENTRY_POINT_GROUP, own=True)

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> list[str]:
        """Register every other installed distribution's entry point in `group`."""
        return self._load_group(group, own=False)

    def _load_group(self, group: str, *, own: bool) -> list[str]:
        names = []
        for ep in sorted(importlib.metadata.entry_points(group=group), key=lambda e: e.name):
            dist = getattr(ep, "dist", None)
            if ep.name in self.blocked or _is_own(dist) != own:
                continue
            source = f"{dist.name} {dist.version}" if dist is not None else ep.value
            try:
                obj = ep.load()
            except Exception as e:
                raise PluginError(
                    f"plugin {ep.name!r} (entry point {ep.value} of {source}): import failed: "
                    f"{type(e).__name__}: {e} (set {BLOCK_ENV_VAR}={ep.name} to skip it)"
                ) from e
            origin = "builtin" if own else "entry point"
            names.append(self.register(obj, name=ep.name, origin=origin, source=source))
        return names
