"""The plugin host: discovery, validated registration, hook calls.

Design choices:

* One `PluginHost` wraps one pluggy `PluginManager`; nothing is global except the
  process default that `get_host()` builds lazily (and `set_host`/`using_host` swap), so
  a test can build a fresh host, register fakes on it and throw it away.
* Plugins come from four places, each recorded as the plugin's origin: `builtin`
  (studio-align's own entry points, declared in its `pyproject.toml` like any third
  party's, so the host imports no product by name), `entry point` (other installed
  distributions, group `studio_align`), `file`/`module` (`--plugin`) and `env`
  (`STUDIO_ALIGN_PLUGINS`). A file plugin runs under a module name derived from its
  resolved path, so loading it twice is a no-op and two files with one stem do not
  collide. Every failure names the plugin and its origin (and how to skip it).
* Hooks are called through pluggy (`pm.subset_hook_caller`, narrowed to one plugin at a
  time). The host adds only what pluggy lacks: each registration hook gets a
  `register` callback bound to its plugin, so every entry is attributed and validated as
  it happens (wrong types, duplicate names naming both plugins); an exception or
  `sys.exit` in a hook becomes a `PluginError` naming the plugin and the hook; a metrics
  logger that fails is counted and the run goes on; unmarked module-level functions
  named `studio_align_*` count as hook implementations.
* What plugins register is collected lazily on first use and recollected after any
  plugin is added or removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import click
import pluggy

from studio_align import hookspecs
from studio_align.catalog import Catalog
from studio_align.commands import LazyCommand, PluginCommands
from studio_align.errors import ConfigError, PluginError
from studio_align.hookspecs import HOOK_PREFIX, PROJECT, EncoderSpec
from studio_align.plugins.registry import (
    BUNDLE_CLASSES_HOOK,
    ENCODERS_HOOK,
    ENGINES_HOOK,
    REWARDS_HOOK,
    TASKS_HOOK,
    Registry,
)
from studio_align.rewards import Reward
from studio_align.tasks import TaskSpec

log = logging.getLogger("studio_align.plugins")

ENV_VAR = "STUDIO_ALIGN_PLUGINS"
BLOCK_ENV_VAR = "STUDIO_ALIGN_BLOCK_PLUGINS"
ENTRY_POINT_GROUP = PROJECT
OWN_DISTRIBUTION = "studio-align"


def _is_own(dist: Any) -> bool:
    name = getattr(dist, "name", None) or ""
    return name.replace("_", "-").lower() == OWN_DISTRIBUTION


ORIGINS = ("builtin", "entry point", "file", "module", "env", "manual")

COMMANDS_HOOK = "studio_align_register_commands"
METRICS_HOOK = "studio_align_on_metrics"
CHECKPOINT_HOOK = "studio_align_on_checkpoint"


@dataclass
class PluginInfo:
    """One plugin as `studio-align plugins list` shows it."""

    name: str
    origin: str
    source: str
    hooks: list[str]
    rewards: list[str] = field(default_factory=list)
    encoders: list[str] = field(default_factory=list)
    engines: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Manager(pluggy.PluginManager):
    """Also accepts unmarked plain functions named `studio_align_*` as hook impls."""

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        opts = super().parse_hookimpl_opts(plugin, name)
        unmarked_hook = (
            opts is None
            and name.startswith(HOOK_PREFIX)
            and inspect.isfunction(inspect.getattr_static(plugin, name, None))
        )
        if unmarked_hook:
            return {
                "wrapper": False,
                "hookwrapper": False,
                "optionalhook": False,
                "tryfirst": False,
                "trylast": False,
                "specname": None,
            }
        return opts


def _one_line(text: str) -> str:
    return "; ".join(part.strip() for part in str(text).splitlines() if part.strip())


class PluginHost:
    """Loads plugins, validates what they register, and calls their hooks."""

    def __init__(self) -> None:
        self.pm = _Manager(PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self._origin: dict[str, tuple[str, str]] = {}
        self._registry: Registry | None = None
        self._commands: (
            tuple[dict[str, click.Command], dict[tuple[str, ...], LazyCommand]] | None
        ) = None
        self._command_owner: dict[str, str] = {}
        self.blocked: set[str] = set()
        self.metrics_hook_failures: dict[str, int] = {}  # plugin -> failed calls

    # ---------------------------------------------------------------- construction
    @classmethod
    def default(
        cls,
        plugins: Sequence[str] = (),
        *,
        entry_points: bool = True,
        env: Mapping[str, str] | None = None,
    ) -> PluginHost:
        """Builtins, installed entry points, `STUDIO_ALIGN_PLUGINS`, then `plugins`.

        Plugins named in `STUDIO_ALIGN_BLOCK_PLUGINS` (comma-separated) are skipped.
        """
        env = os.environ if env is None else env
        host = cls()
        host.blocked = {n.strip() for n in env.get(BLOCK_ENV_VAR, "").split(",") if n.strip()}
        host.load_builtins()
        if entry_points:
            host.load_entry_points()
        host.load_env(env.get(ENV_VAR, ""))
        for spec in plugins:
            host.load(spec)
        return host

    def register(
        self, plugin: Any, name: str | None = None, *, origin: str = "manual", source: str = ""
    ) -> str:
        """Register a plugin object (module, class instance) and return its name.

        Registering the same object twice is a no-op; a different object under a taken
        name is an error naming both origins. A blocked name is skipped.
        """
        if self.pm.is_registered(plugin):
            return self.pm.get_name(plugin) or ""
        name = name or getattr(plugin, "__name__", None) or self.pm.get_canonical_name(plugin)
        source = source or getattr(plugin, "__name__", "") or repr(plugin)
        if name in self.blocked:
            return name
        if self.pm.has_plugin(name):
            prev_origin, prev_source = self._origin.get(name, ("manual", ""))
            raise PluginError(
                f"plugin name {name!r} ({origin} {source}) is already taken by the plugin "
                f"from {prev_origin} {prev_source}"
            )
        try:
            self.pm.register(plugin, name=name)
        except pluggy.PluginValidationError as e:
            raise PluginError(
                f"plugin {name!r} ({origin}): invalid hook: {_one_line(str(e))}"
            ) from e
        unknown = [hc.name for hc in self.pm.get_hookcallers(plugin) or [] if not hc.has_spec()]
        if unknown:
            self.pm.unregister(plugin)
            known = ", ".join(sorted(n for n in dir(hookspecs) if n.startswith(HOOK_PREFIX)))
            raise PluginError(
                f"plugin {name!r} ({origin}) implements unknown hook(s) {', '.join(unknown)} "
                f"(known hooks: {known})"
            )
        self._origin[name] = (origin, source)
        self._invalidate()
        return name

    def unregister(self, name: str) -> None:
        """Remove a plugin by name (tests register fakes and take them away again)."""
        self.pm.unregister(name=name)
        self._origin.pop(name, None)
        self._invalidate()

    # ---------------------------------------------------------------- discovery
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
        if p.is_dir():
            raise PluginError(
                f"plugin file {str(path)!r} ({origin}): a folder; give its .py file, or "
                "install the package and name its module"
            )
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

    # ---------------------------------------------------------------- hook calls
    def _invalidate(self) -> None:
        self._registry = None
        self._commands = None
        self._command_owner = {}

    def _each_plugin(self, hook_name: str) -> Iterator[tuple[str, Any]]:
        """`(plugin name, hook caller)` for each plugin implementing `hook_name`: pluggy's
        own call (`pm.subset_hook_caller`) narrowed to that one plugin, so what a plugin
        registers is attributed to it and a failure names it."""
        impls = [
            i for i in getattr(self.pm.hook, hook_name).get_hookimpls()
            if not (i.hookwrapper or i.wrapper)  # wrappers keep wrapping each call
        ]  # fmt: skip
        for impl in impls:
            others = [i.plugin for i in impls if i is not impl]
            yield impl.plugin_name, self.pm.subset_hook_caller(hook_name, others)

    @staticmethod
    @contextlib.contextmanager
    def _naming(plugin: str, hook_name: str) -> Iterator[None]:
        """An exception raised in a plugin's hook becomes a `PluginError` naming both."""
        try:
            yield
        except PluginError:
            raise
        except SystemExit as e:  # would end the process silently
            raise PluginError(
                f"plugin {plugin!r} called sys.exit({e.code!r}) in hook {hook_name}"
            ) from e
        except Exception as e:
            raise PluginError(
                f"plugin {plugin!r} raised {type(e).__name__} in hook {hook_name}: {e}"
            ) from e

    def _collect(self) -> Registry:
        if self._registry is None:
            reg = Registry()
            for hook, make in (
                (ENGINES_HOOK, reg.engine_register),
                (ENCODERS_HOOK, reg.encoder_register),
                (REWARDS_HOOK, reg.reward_register),
                (TASKS_HOOK, reg.task_register),
                (BUNDLE_CLASSES_HOOK, reg.bundle_class_register),
            ):
                for plugin, call in self._each_plugin(hook):
                    with self._naming(plugin, hook):
                        call(register=make(plugin))
            self._registry = reg
        return self._registry

    # ---------------------------------------------------------------- what plugins registered
    @property
    def rewards(self) -> Mapping[str, Reward]:
        """Every registered reward by name (one registered by reference is imported on lookup)."""
        return self._collect().rewards

    @property
    def encoders(self) -> dict[str, EncoderSpec]:
        """Every registered encoder by name."""
        return self._collect().encoders

    @property
    def catalog(self) -> Catalog:
        """The engine catalog: registered engines in registration order (do not mutate)."""
        return self._collect().catalog

    @property
    def tasks(self) -> dict[str, TaskSpec]:
        """Every registered task by name."""
        return self._collect().tasks

    @property
    def bundle_classes(self) -> Mapping[str, type]:
        """Model and config classes plugins allow bundles to name, by `module.QualName`."""
        return MappingProxyType(self._collect().resolve_bundle_classes())

    def task(self, name: str) -> Any:
        """The task registered as `name`, built; an unknown name lists the known ones."""
        specs = self.tasks
        if name not in specs:
            raise ConfigError(
                f"task: unknown task {name!r} (registered: {', '.join(sorted(specs)) or 'none'})"
            )
        spec = specs[name]
        try:
            return spec.build()
        except PluginError:
            raise
        except Exception as e:
            raise PluginError(
                f"plugin {spec.plugin!r}: building task {name!r} raised {type(e).__name__}: {e}"
            ) from e

    @property
    def commands(self) -> dict[str, click.Command]:
        """Top-level commands added through `studio_align_register_commands`, by name."""
        return self._collect_commands()[0]

    @property
    def lazy_commands(self) -> dict[tuple[str, ...], LazyCommand]:
        """Commands added with `cli.lazy(...)`, by path (`("train", "grading")`)."""
        return self._collect_commands()[1]

    def _collect_commands(
        self,
    ) -> tuple[dict[str, click.Command], dict[tuple[str, ...], LazyCommand]]:
        if self._commands is None:
            eager: dict[str, click.Command] = {}
            lazy: dict[tuple[str, ...], LazyCommand] = {}
            owner: dict[str, str] = {}
            for plugin, call in self._each_plugin(COMMANDS_HOOK):
                cli = PluginCommands(plugin)
                with self._naming(plugin, COMMANDS_HOOK):
                    call(cli=cli)
                added = [(name,) for name in cli.commands] + list(cli.lazy_commands)
                for path in added:
                    key = " ".join(path)
                    if key in owner:
                        raise PluginError(
                            f"command {key!r} registered twice: by plugin {owner[key]!r} and "
                            f"by plugin {plugin!r} (hook {COMMANDS_HOOK})"
                        )
                    owner[key] = plugin
                eager.update(cli.commands)
                lazy.update(cli.lazy_commands)
            self._commands = (eager, lazy)
            self._command_owner = owner
        return self._commands

    def commands_under(self, path: tuple[str, ...]) -> dict[str, LazyCommand]:
        """The lazy commands plugins added directly under `path` (`()`: the top level)."""
        return {p[-1]: c for p, c in self.lazy_commands.items() if p[:-1] == path}

    def command_owner(self, name: str) -> str | None:
        """Which plugin registered command `name` (`"train grading"`; None if none did)."""
        self._collect_commands()
        return self._command_owner.get(name)

    def reward(self, name: str) -> Reward:
        """One reward by name; an unknown name is an error listing the known ones."""
        return self.select_rewards([name])[name]

    def select_rewards(self, names: Iterable[str]) -> dict[str, Reward]:
        """The named rewards, in the given order; unknown names are errors."""
        rewards = self.rewards
        names = list(names)
        unknown = [n for n in names if n not in rewards]
        if unknown:
            raise ConfigError(
                f"unknown reward(s) {', '.join(map(repr, unknown))} "
                f"(registered: {', '.join(sorted(rewards)) or 'none'})"
            )
        return {n: rewards[n] for n in names}

    def fire_metrics(
        self, *, run: str, step: int, metrics: Mapping[str, float], run_dir: str = ""
    ) -> None:
        """Send one step's metrics to every `studio_align_on_metrics` implementation.

        A logger is an observer: one that raises (or calls `sys.exit`) is logged once per
        plugin and counted in `metrics_hook_failures`, and the run goes on.
        """
        for name, call in self._each_plugin(METRICS_HOOK):
            view = MappingProxyType(dict(metrics))
            try:
                with self._naming(name, METRICS_HOOK):
                    call(run=run, step=step, metrics=view, run_dir=run_dir)
            except PluginError as e:
                first = name not in self.metrics_hook_failures
                self.metrics_hook_failures[name] = self.metrics_hook_failures.get(name, 0) + 1
                if first:
                    log.warning("%s (further failures of this plugin are counted, not logged)", e)

    def has_checkpoint_hooks(self) -> bool:
        """Whether any plugin implements `studio_align_on_checkpoint`."""
        return bool(self.pm.hook.studio_align_on_checkpoint.get_hookimpls())

    def fire_checkpoint(self, *, run: str, step: int, directory: str) -> None:
        """Tell every `studio_align_on_checkpoint` implementation a checkpoint is saved."""
        for name, call in self._each_plugin(CHECKPOINT_HOOK):
            with self._naming(name, CHECKPOINT_HOOK):
                call(run=run, step=step, directory=directory)

    def describe(self) -> list[PluginInfo]:
        """Every plugin, its origin, hooks and what it registered (for `plugins list`)."""
        reg = self._collect()
        self._collect_commands()
        infos = []
        for name, plugin in self.pm.list_name_plugin():
            if plugin is None:
                continue
            origin, source = self._origin.get(name, ("manual", ""))
            hooks = sorted(hc.name for hc in self.pm.get_hookcallers(plugin) or [])
            infos.append(
                PluginInfo(
                    name=name,
                    origin=origin,
                    source=source,
                    hooks=hooks,
                    rewards=[r for r in reg.rewards if reg.rewards.owner(r) == name],
                    encoders=[e for e, v in reg.encoders.items() if v.plugin == name],
                    engines=[e for e, p in reg.engine_owner.items() if p == name],
                    tasks=[t for t, v in reg.tasks.items() if v.plugin == name],
                    commands=[c for c, p in self._command_owner.items() if p == name],
                )
            )
        return infos


__all__ = [
    "BLOCK_ENV_VAR",
    "ENV_VAR",
    "ORIGINS",
    "PluginHost",
    "PluginInfo",
]
