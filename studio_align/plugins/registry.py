"""Validated registration: the `register` callbacks handed to each plugin's hooks.

Each callback is bound to one plugin, so every entry is attributed; a wrong type, an
invalid name or a duplicate (naming both plugins) becomes a `PluginError` naming the
plugin and the hook.

Rewards, encoder factories, tasks and bundle classes may be registered as
`"module:attribute"` references (as entry points are written): the name is known at
once and the module is imported on first use, so `studio-align --help` and
`plugins list` import no model code.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from studio_align.catalog import Catalog, Engine
from studio_align.errors import PluginError, RewardError
from studio_align.hookspecs import EncoderSpec
from studio_align.rewards import Reward
from studio_align.tasks import TaskSpec

REWARDS_HOOK = "studio_align_register_rewards"
ENCODERS_HOOK = "studio_align_register_encoders"
ENGINES_HOOK = "studio_align_register_engines"
TASKS_HOOK = "studio_align_register_tasks"
BUNDLE_CLASSES_HOOK = "studio_align_register_bundle_classes"

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def check_name(kind: str, name: Any, plugin: str, hook: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise PluginError(
            f"plugin {plugin!r}, hook {hook}: invalid {kind} name {name!r} "
            "(letters, digits, '_', '.', '-'; pass name=...)"
        )
    return name


def resolve(target: str, what: str) -> Any:
    """The object a `"module:attribute"` reference names; a failure names `what`."""
    module, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as e:
        raise PluginError(f"{what}: cannot load {target}: {type(e).__name__}: {e}") from e
    return obj


def is_reference(obj: Any) -> bool:
    """Whether `obj` is a `"module:attribute"` reference."""
    return isinstance(obj, str) and ":" in obj


@dataclass(frozen=True)
class LazyFactory:
    """A factory known by reference, imported when first called."""

    target: str
    what: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return resolve(self.target, self.what)(*args, **kwargs)


class Rewards(Mapping[str, Reward]):
    """Registered rewards by name; one registered by reference is imported on first lookup."""

    def __init__(self) -> None:
        self._owner: dict[str, str] = {}  # name -> plugin, in registration order
        self._built: dict[str, Reward] = {}
        self._refs: dict[str, tuple[str, str | None]] = {}  # name -> (target, description)

    def add(self, reward: Reward) -> None:
        self._owner[reward.name] = reward.plugin or ""
        self._built[reward.name] = reward

    def add_reference(self, name: str, target: str, description: str | None, plugin: str) -> None:
        self._owner[name] = plugin
        self._refs[name] = (target, description)

    def owner(self, name: str) -> str:
        """The plugin that registered reward `name` (nothing is imported)."""
        return self._owner[name]

    def __contains__(self, name: object) -> bool:
        return name in self._owner

    def __iter__(self) -> Iterator[str]:
        return iter(self._owner)

    def __len__(self) -> int:
        return len(self._owner)

    def __getitem__(self, name: str) -> Reward:
        if name not in self._built:
            target, description = self._refs[name]  # KeyError for an unknown name
            plugin = self._owner[name]
            fn = resolve(target, f"plugin {plugin!r}: reward {name!r}")
            if description is None:
                description = (inspect.getdoc(fn) or "").strip().split("\n")[0]
            try:
                self._built[name] = Reward(name, fn, description, plugin=plugin)
            except RewardError as e:
                raise PluginError(f"plugin {plugin!r}, hook {REWARDS_HOOK}: {e}") from e
        return self._built[name]


@dataclass
class Registry:
    """What the plugins registered, filled one plugin at a time through `register`
    callbacks that validate each entry and name the plugin and hook at fault."""

    rewards: Rewards = field(default_factory=Rewards)
    encoders: dict[str, EncoderSpec] = field(default_factory=dict)
    catalog: Catalog = field(default_factory=lambda: Catalog(engines=[]))
    engine_owner: dict[str, str] = field(default_factory=dict)
    tasks: dict[str, TaskSpec] = field(default_factory=dict)
    bundle_classes: dict[str, type] = field(default_factory=dict)  # "module.QualName" -> class
    bundle_class_owner: dict[str, str] = field(default_factory=dict)
    # (class or "module:QualName", plugin), checked and resolved on first use
    bundle_class_entries: list[tuple[Any, str]] = field(default_factory=list)

    def reward_register(self, plugin: str) -> Callable[..., None]:
        def register(
            reward: Reward | Callable[..., Any] | str,
            name: str | None = None,
            *,
            description: str | None = None,
        ) -> None:
            timeout_s = None
            if is_reference(reward):
                assert isinstance(reward, str)
                rname = check_name(
                    "reward", name or reward.rpartition(":")[2], plugin, REWARDS_HOOK
                )
                self._check_new_reward(rname, plugin)
                self.rewards.add_reference(rname, reward, description, plugin)
                return
            if isinstance(reward, Reward):
                fn, default_desc = reward.fn, reward.description
                default_name: str | None = reward.name
                timeout_s = reward.timeout_s  # the plugin's own limit survives registration
            elif callable(reward):
                fn, default_name = reward, getattr(reward, "__name__", None)
                default_desc = (inspect.getdoc(reward) or "").strip().split("\n")[0]
            else:
                raise PluginError(
                    f"plugin {plugin!r}, hook {REWARDS_HOOK}: expected a Reward or a callable, "
                    f"got {type(reward).__name__}"
                )
            rname = check_name("reward", name or default_name, plugin, REWARDS_HOOK)
            desc = default_desc if description is None else description
            try:
                r = Reward(rname, fn, desc, plugin=plugin, timeout_s=timeout_s)
            except RewardError as e:
                raise PluginError(f"plugin {plugin!r}, hook {REWARDS_HOOK}: {e}") from e
            self._check_new_reward(rname, plugin)
            self.rewards.add(r)

        return register

    def _check_new_reward(self, name: str, plugin: str) -> None:
        if name in self.rewards:
            raise PluginError(
                f"reward {name!r} registered twice: by plugin {self.rewards.owner(name)!r} "
                f"and by plugin {plugin!r} (hook {REWARDS_HOOK})"
            )

    def encoder_register(self, plugin: str) -> Callable[..., None]:
        def register(
            encoder: EncoderSpec | Callable[..., Any],
            name: str | None = None,
            *,
            description: str | None = None,
        ) -> None:
            if isinstance(encoder, EncoderSpec):
                factory, default_desc = encoder.factory, encoder.description
                default_name: str | None = encoder.name
                if is_reference(factory):
                    what = f"plugin {plugin!r}: encoder {default_name!r}"
                    factory = LazyFactory(str(factory), what)
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
            ename = check_name("encoder", name or default_name, plugin, ENCODERS_HOOK)
            if ename in self.encoders:
                raise PluginError(
                    f"encoder {ename!r} registered twice: by plugin {self.encoders[ename].plugin!r} "
                    f"and by plugin {plugin!r} (hook {ENCODERS_HOOK})"
                )
            desc = default_desc if description is None else description
            self.encoders[ename] = EncoderSpec(ename, factory, desc, plugin=plugin)

        return register

    def engine_register(self, plugin: str) -> Callable[..., None]:
        def register(engine: Engine) -> None:
            if not isinstance(engine, Engine):
                raise PluginError(
                    f"plugin {plugin!r}, hook {ENGINES_HOOK}: expected an Engine, "
                    f"got {type(engine).__name__}"
                )
            if engine.name in self.engine_owner:
                raise PluginError(
                    f"engine {engine.name!r} registered twice: by plugin "
                    f"{self.engine_owner[engine.name]!r} and by plugin {plugin!r} (hook {ENGINES_HOOK})"
                )
            self.catalog.add(engine)
            self.engine_owner[engine.name] = plugin

        return register

    def task_register(self, plugin: str) -> Callable[..., None]:
        def register(
            task: TaskSpec | Callable[[], Any],
            name: str | None = None,
            *,
            description: str | None = None,
        ) -> None:
            if isinstance(task, TaskSpec):
                factory, default_desc = task.factory, task.description
                default_name: str | None = task.name
            elif callable(task):
                factory, default_name = task, getattr(task, "__name__", None)
                default_desc = (inspect.getdoc(task) or "").strip().split("\n")[0]
            else:
                raise PluginError(
                    f"plugin {plugin!r}, hook {TASKS_HOOK}: expected a TaskSpec or a "
                    f"factory callable, got {type(task).__name__}"
                )
            tname = check_name("task", name or default_name, plugin, TASKS_HOOK)
            if tname in self.tasks:
                raise PluginError(
                    f"task {tname!r} registered twice: by plugin {self.tasks[tname].plugin!r} "
                    f"and by plugin {plugin!r} (hook {TASKS_HOOK})"
                )
            desc = default_desc if description is None else description
            self.tasks[tname] = TaskSpec(tname, factory, desc, plugin=plugin)

        return register

    def bundle_class_register(self, plugin: str) -> Callable[..., None]:
        def register(*classes: type | str) -> None:
            self.bundle_class_entries.extend((cls, plugin) for cls in classes)

        return register

    def resolve_bundle_classes(self) -> dict[str, type]:
        """Every bundle class, in registration order, references imported now."""
        while self.bundle_class_entries:
            cls, plugin = self.bundle_class_entries.pop(0)
            if is_reference(cls):
                cls = resolve(str(cls), f"plugin {plugin!r}: bundle class")
            self._add_bundle_class(cls, plugin)
        return self.bundle_classes

    def _add_bundle_class(self, cls: Any, plugin: str) -> None:
        if not isinstance(cls, type):
            raise PluginError(
                f"plugin {plugin!r}, hook {BUNDLE_CLASSES_HOOK}: expected a class, got {cls!r}"
            )
        name = f"{cls.__module__}.{cls.__qualname__}"
        if self.bundle_classes.get(name, cls) is not cls:  # the same class again: fine
            raise PluginError(
                f"bundle class {name!r} registered twice, as different classes: by "
                f"plugin {self.bundle_class_owner[name]!r} and by plugin {plugin!r} "
                f"(hook {BUNDLE_CLASSES_HOOK})"
            )
        self.bundle_classes[name] = cls
        self.bundle_class_owner.setdefault(name, plugin)
