"""Validated registration: the `register` callbacks handed to each plugin's hooks.

Each callback is bound to one plugin, so every entry is attributed; a wrong type, an
invalid name or a duplicate (naming both plugins) becomes a `PluginError` naming the
plugin and the hook.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
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


@dataclass
class Registry:
    """What the plugins registered, filled one plugin at a time through `register`
    callbacks that validate each entry and name the plugin and hook at fault."""

    rewards: dict[str, Reward] = field(default_factory=dict)
    encoders: dict[str, EncoderSpec] = field(default_factory=dict)
    catalog: Catalog = field(default_factory=lambda: Catalog(engines=[]))
    engine_owner: dict[str, str] = field(default_factory=dict)
    tasks: dict[str, TaskSpec] = field(default_factory=dict)
    bundle_classes: dict[str, type] = field(default_factory=dict)  # "module.QualName" -> class
    bundle_class_owner: dict[str, str] = field(default_factory=dict)

    def reward_register(self, plugin: str) -> Callable[..., None]:
        def register(
            reward: Reward | Callable[..., Any],
            name: str | None = None,
            *,
            description: str | None = None,
        ) -> None:
            timeout_s = None
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
            if rname in self.rewards:
                raise PluginError(
                    f"reward {rname!r} registered twice: by plugin {self.rewards[rname].plugin!r} "
                    f"and by plugin {plugin!r} (hook {REWARDS_HOOK})"
                )
            self.rewards[rname] = r

        return register

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
        def register(*classes: type) -> None:
            for cls in classes:
                if not isinstance(cls, type):
                    raise PluginError(
                        f"plugin {plugin!r}, hook {BUNDLE_CLASSES_HOOK}: expected a class, "
                        f"got {cls!r}"
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

        return register
