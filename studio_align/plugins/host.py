"""The plugin host: discovery, validated registration, hook calls.

Design choices:

* One `PluginHost` wraps one pluggy `PluginManager`; nothing is global except the
  process default that `get_host()` builds lazily (and `set_host`/`using_host` swap), so
  a test can build a fresh host, register fakes on it and throw it away.
* Plugins come from four places, each recorded as the plugin's origin: `builtin`
  (modules in `BUILTIN_PLUGINS`), `entry point` (installed distributions, group
  `studio_align`), `file`/`module` (`--plugin`) and `env` (`STUDIO_ALIGN_PLUGINS`).
* Registration hooks are called one plugin at a time with a `register` callback bound
  to that plugin, so every registration is attributed and validated as it happens:
  wrong types, duplicate names (naming both plugins) and exceptions raised in a hook
  all become `PluginError`s naming the plugin and the hook.
* What plugins register is collected lazily on first use and recollected after any
  plugin is added or removed.
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any

import click
import pluggy

from studio_align import hookspecs
from studio_align.catalog import Catalog
from studio_align.commands import LazyCommand, PluginCommands
from studio_align.errors import ConfigError, PluginError
from studio_align.hookspecs import HOOK_PREFIX, PROJECT, EncoderSpec
from studio_align.plugins.discovery import BLOCK_ENV_VAR, ENV_VAR, Discovery
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


class PluginHost(Discovery):
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

    # ---------------------------------------------------------------- hook calls
    def _invalidate(self) -> None:
        self._registry = None
        self._commands = None
        self._command_owner = {}

    def _impls(self, hook_name: str) -> list[Any]:
        caller = getattr(self.pm.hook, hook_name)
        return [i for i in caller.get_hookimpls() if not (i.hookwrapper or i.wrapper)]

    def _call(self, impl: Any, hook_name: str, **kwargs: Any) -> Any:
        args = [kwargs[a] for a in impl.argnames]
        try:
            return impl.function(*args)
        except PluginError:
            raise
        except SystemExit as e:  # would end the process silently
            raise PluginError(
                f"plugin {impl.plugin_name!r} called sys.exit({e.code!r}) in hook {hook_name}"
            ) from e
        except Exception as e:
            raise PluginError(
                f"plugin {impl.plugin_name!r} raised {type(e).__name__} in hook {hook_name}: {e}"
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
                for impl in self._impls(hook):
                    self._call(impl, hook, register=make(impl.plugin_name))
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
            for impl in self._impls(COMMANDS_HOOK):
                cli = PluginCommands(impl.plugin_name)
                self._call(impl, COMMANDS_HOOK, cli=cli)
                added = [(name,) for name in cli.commands] + list(cli.lazy_commands)
                for path in added:
                    key = " ".join(path)
                    if key in owner:
                        raise PluginError(
                            f"command {key!r} registered twice: by plugin {owner[key]!r} and "
                            f"by plugin {impl.plugin_name!r} (hook {COMMANDS_HOOK})"
                        )
                    owner[key] = impl.plugin_name
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
        for impl in self._impls(METRICS_HOOK):
            view = MappingProxyType(dict(metrics))
            try:
                self._call(impl, METRICS_HOOK, run=run, step=step, metrics=view, run_dir=run_dir)
            except PluginError as e:
                name = impl.plugin_name
                first = name not in self.metrics_hook_failures
                self.metrics_hook_failures[name] = self.metrics_hook_failures.get(name, 0) + 1
                if first:
                    log.warning("%s (further failures of this plugin are counted, not logged)", e)

    def has_checkpoint_hooks(self) -> bool:
        """Whether any plugin implements `studio_align_on_checkpoint`."""
        return bool(self._impls(CHECKPOINT_HOOK))

    def fire_checkpoint(self, *, run: str, step: int, directory: str) -> None:
        """Tell every `studio_align_on_checkpoint` implementation a checkpoint is saved."""
        for impl in self._impls(CHECKPOINT_HOOK):
            self._call(impl, CHECKPOINT_HOOK, run=run, step=step, directory=directory)

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
