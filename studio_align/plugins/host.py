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

import contextlib
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import click
import pluggy

from studio_align import hookspecs
from studio_align.errors import ConfigError, PluginError, RewardError
from studio_align.hookspecs import HOOK_PREFIX, PROJECT, EncoderSpec
from studio_align.intents.catalog import Catalog, Engine
from studio_align.rewards import Reward, RewardScores, score_batch

ENV_VAR = "STUDIO_ALIGN_PLUGINS"
BLOCK_ENV_VAR = "STUDIO_ALIGN_BLOCK_PLUGINS"
ENTRY_POINT_GROUP = PROJECT
ORIGINS = ("builtin", "entry point", "file", "module", "env", "manual")

REWARDS_HOOK = "studio_align_register_rewards"
ENCODERS_HOOK = "studio_align_register_encoders"
ENGINES_HOOK = "studio_align_register_engines"
COMMANDS_HOOK = "studio_align_register_commands"
METRICS_HOOK = "studio_align_on_metrics"

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


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
    commands: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Registry:
    rewards: dict[str, Reward] = field(default_factory=dict)
    encoders: dict[str, EncoderSpec] = field(default_factory=dict)
    catalog: Catalog = field(default_factory=lambda: Catalog(engines=[]))
    engine_owner: dict[str, str] = field(default_factory=dict)


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
        self._registry: _Registry | None = None
        self._commands: dict[str, click.Command] | None = None
        self._command_owner: dict[str, str] = {}
        self.blocked: set[str] = set()

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
        """Register the built-in plugins (`studio_align.plugins.BUILTIN_PLUGINS`)."""
        from studio_align.plugins import BUILTIN_PLUGINS

        return [self.load_module(m, origin="builtin") for m in BUILTIN_PLUGINS]

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> list[str]:
        """Register every installed distribution's entry point in `group`."""
        names = []
        for ep in sorted(importlib.metadata.entry_points(group=group), key=lambda e: e.name):
            if ep.name in self.blocked:
                continue
            dist = getattr(ep, "dist", None)
            source = f"{dist.name} {dist.version}" if dist is not None else ep.value
            try:
                obj = ep.load()
            except Exception as e:
                raise PluginError(
                    f"plugin {ep.name!r} (entry point {ep.value} of {source}): import failed: "
                    f"{type(e).__name__}: {e} (set {BLOCK_ENV_VAR}={ep.name} to skip it)"
                ) from e
            names.append(self.register(obj, name=ep.name, origin="entry point", source=source))
        return names

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
        except Exception as e:
            raise PluginError(
                f"plugin {impl.plugin_name!r} raised {type(e).__name__} in hook {hook_name}: {e}"
            ) from e

    def _collect(self) -> _Registry:
        if self._registry is None:
            reg = _Registry()
            for impl in self._impls(ENGINES_HOOK):
                self._call(
                    impl, ENGINES_HOOK, register=self._engine_register(reg, impl.plugin_name)
                )
            for impl in self._impls(ENCODERS_HOOK):
                self._call(
                    impl, ENCODERS_HOOK, register=self._encoder_register(reg, impl.plugin_name)
                )
            for impl in self._impls(REWARDS_HOOK):
                self._call(
                    impl, REWARDS_HOOK, register=self._reward_register(reg, impl.plugin_name)
                )
            self._registry = reg
        return self._registry

    @staticmethod
    def _check_name(kind: str, name: Any, plugin: str, hook: str) -> str:
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise PluginError(
                f"plugin {plugin!r}, hook {hook}: invalid {kind} name {name!r} "
                "(letters, digits, '_', '.', '-'; pass name=...)"
            )
        return name

    def _reward_register(self, reg: _Registry, plugin: str) -> Callable[..., None]:
        def register(
            reward: Reward | Callable[..., Any],
            name: str | None = None,
            *,
            description: str | None = None,
        ) -> None:
            if isinstance(reward, Reward):
                fn, default_desc = reward.fn, reward.description
                default_name: str | None = reward.name
            elif callable(reward):
                fn, default_name = reward, getattr(reward, "__name__", None)
                default_desc = (inspect.getdoc(reward) or "").strip().split("\n")[0]
            else:
                raise PluginError(
                    f"plugin {plugin!r}, hook {REWARDS_HOOK}: expected a Reward or a callable, "
                    f"got {type(reward).__name__}"
                )
            rname = self._check_name("reward", name or default_name, plugin, REWARDS_HOOK)
            desc = default_desc if description is None else description
            try:
                r = Reward(rname, fn, desc, plugin=plugin)
            except RewardError as e:
                raise PluginError(f"plugin {plugin!r}, hook {REWARDS_HOOK}: {e}") from e
            if rname in reg.rewards:
                raise PluginError(
                    f"reward {rname!r} registered twice: by plugin {reg.rewards[rname].plugin!r} "
                    f"and by plugin {plugin!r} (hook {REWARDS_HOOK})"
                )
            reg.rewards[rname] = r

        return register

    def _encoder_register(self, reg: _Registry, plugin: str) -> Callable[..., None]:
        def register(
            encoder: EncoderSpec | Callable[..., Any],
            name: str | None = None,
            *,
            description: str | None = None,
        ) -> None:
            if isinstance(encoder, EncoderSpec):
                factory, default_desc = encoder.factory, encoder.description
                default_name: str | None = encoder.name
            elif callable(encoder):
                factory, default_name = encoder, getattr(encoder, "__name__", None)
                default_desc = (inspect.getdoc(encoder) or "").strip().split("\n")[0]
            else:
                raise PluginError(
                    f"plugin {plugin!r}, hook {ENCODERS_HOOK}: expected an EncoderSpec or a "
                    f"factory callable, got {type(encoder).__name__}"
                )
            if not callable(factory):
                raise PluginError(
                    f"plugin {plugin!r}, hook {ENCODERS_HOOK}: encoder factory is not callable"
                )
            ename = self._check_name("encoder", name or default_name, plugin, ENCODERS_HOOK)
            if ename in reg.encoders:
                raise PluginError(
                    f"encoder {ename!r} registered twice: by plugin {reg.encoders[ename].plugin!r} "
                    f"and by plugin {plugin!r} (hook {ENCODERS_HOOK})"
                )
            desc = default_desc if description is None else description
            reg.encoders[ename] = EncoderSpec(ename, factory, desc, plugin=plugin)

        return register

    def _engine_register(self, reg: _Registry, plugin: str) -> Callable[..., None]:
        def register(engine: Engine) -> None:
            if not isinstance(engine, Engine):
                raise PluginError(
                    f"plugin {plugin!r}, hook {ENGINES_HOOK}: expected an Engine, "
                    f"got {type(engine).__name__}"
                )
            if engine.name in reg.engine_owner:
                raise PluginError(
                    f"engine {engine.name!r} registered twice: by plugin "
                    f"{reg.engine_owner[engine.name]!r} and by plugin {plugin!r} (hook {ENGINES_HOOK})"
                )
            reg.catalog.add(engine)
            reg.engine_owner[engine.name] = plugin

        return register

    # ---------------------------------------------------------------- what plugins registered
    @property
    def rewards(self) -> dict[str, Reward]:
        """Every registered reward by name."""
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
    def commands(self) -> dict[str, click.Command]:
        """Commands added through `studio_align_register_commands`, by name."""
        if self._commands is None:
            scratch = click.Group(name="studio-align")
            owner: dict[str, str] = {}
            for impl in self._impls(COMMANDS_HOOK):
                before = dict(scratch.commands)
                self._call(impl, COMMANDS_HOOK, cli=scratch)
                for cname, cmd in scratch.commands.items():
                    if before.get(cname) is cmd:
                        continue
                    if not isinstance(cmd, click.Command):
                        raise PluginError(
                            f"plugin {impl.plugin_name!r}, hook {COMMANDS_HOOK}: expected a click "
                            f"command, got {type(cmd).__name__} for {cname!r}"
                        )
                    if cname in before:
                        raise PluginError(
                            f"command {cname!r} registered twice: by plugin {owner[cname]!r} and "
                            f"by plugin {impl.plugin_name!r} (hook {COMMANDS_HOOK})"
                        )
                    owner[cname] = impl.plugin_name
            self._commands = dict(scratch.commands)
            self._command_owner = owner
        return self._commands

    def command_owner(self, name: str) -> str | None:
        """Which plugin registered command `name` (None if no plugin did)."""
        self.commands  # noqa: B018 - collect
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

    def score_batch(
        self,
        rewards: Mapping[str, float] | Sequence[str],
        columns: Mapping[str, Sequence[Any]],
        *,
        context: Mapping[str, Any] | None = None,
        size: int | None = None,
    ) -> RewardScores:
        """Score with registered rewards chosen by name: `{name: weight}` or `[name, ...]`.

        The host's `catalog` is offered to rewards as context unless given.
        """
        weights = dict(rewards) if isinstance(rewards, Mapping) else None
        selected = self.select_rewards(rewards)
        ctx = {"catalog": self.catalog, **(context or {})}
        return score_batch(selected, weights, columns, context=ctx, size=size)

    def fire_metrics(self, *, run: str, step: int, metrics: Mapping[str, float]) -> None:
        """Send one step's metrics to every `studio_align_on_metrics` implementation."""
        for impl in self._impls(METRICS_HOOK):
            view = MappingProxyType(dict(metrics))
            self._call(impl, METRICS_HOOK, run=run, step=step, metrics=view)

    def describe(self) -> list[PluginInfo]:
        """Every plugin, its origin, hooks and what it registered (for `plugins list`)."""
        reg = self._collect()
        commands = self.commands
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
                    rewards=[r for r, v in reg.rewards.items() if v.plugin == name],
                    encoders=[e for e, v in reg.encoders.items() if v.plugin == name],
                    engines=[e for e, p in reg.engine_owner.items() if p == name],
                    commands=[c for c in commands if self._command_owner.get(c) == name],
                )
            )
        return infos


# -------------------------------------------------------------------- process default
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


__all__ = [
    "BLOCK_ENV_VAR",
    "ENV_VAR",
    "ORIGINS",
    "PluginHost",
    "PluginInfo",
    "get_host",
    "set_host",
    "using_host",
]
