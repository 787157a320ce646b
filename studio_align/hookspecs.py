"""The plugin contract: hook specifications and the types plugins register.

Design choices:

* pluggy project name `studio_align`; every hook carries the prefix `studio_align_`.
* Registration hooks take a `register` callback (as the `llm` CLI does) instead of
  returning values, so the host can validate each registration as it happens and name
  the plugin and hook at fault.
* A plugin marks its functions with `hookimpl` (exported here); the host also accepts
  unmarked module-level functions whose name starts with `studio_align_`, so a
  single-file plugin needs no imports at all.

A reward plugin, complete::

    from studio_align.hookspecs import hookimpl

    @hookimpl
    def studio_align_register_rewards(register):
        def short_plans(plans):
            return [1.0 / (1 + len(p)) for p in plans]
        register(short_plans)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import pluggy

if TYPE_CHECKING:
    import numpy as np
    from PIL import Image

    from studio_align.commands import PluginCommands

PROJECT = "studio_align"
HOOK_PREFIX = "studio_align_"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@runtime_checkable
class Encoder(Protocol):
    """An image (and optionally text) encoder, as made by an `EncoderSpec.factory`.

    `identity` names the encoder and its weights exactly (it keys the embedding cache);
    `encode_images` returns float32 `[N, dim]`. Text-capable encoders also define
    `encode_texts(list[str]) -> [N, dim]`.
    """

    identity: str
    dim: int

    def encode_images(self, images: list[Image.Image]) -> np.ndarray: ...


@dataclass(frozen=True)
class EncoderSpec:
    """A named encoder factory: `factory(**options) -> Encoder`, or its `"module:attribute"`
    reference (imported when the first encoder is made)."""

    name: str
    factory: Callable[..., Encoder] | str
    description: str = ""
    plugin: str | None = None


@hookspec
def studio_align_register_rewards(register: Callable[..., None]) -> None:
    """Register reward functions: `register(fn_or_Reward, name=None, description=None)`.

    `fn` may be a `"module:function"` reference, imported when the reward is first
    looked up (its name defaults to the function's).

    A reward takes keyword arguments named after batch columns (`requests`, `plans`,
    `gold_plans`, `images`, `prompts`, `creators`, ...) and returns one float or `None`
    per sample. See `studio_align.rewards`.
    """


@hookspec
def studio_align_register_encoders(register: Callable[..., None]) -> None:
    """Register encoders: `register(EncoderSpec | factory, name=None, description=None)`."""


@hookspec
def studio_align_register_engines(register: Callable[..., None]) -> None:
    """Register generation engines for the router's catalog: `register(Engine)`."""


@hookspec
def studio_align_register_commands(cli: PluginCommands) -> None:
    """Add commands to the `studio-align` command line.

    `@cli.command()`/`@cli.group()` add a top-level click command;
    `cli.lazy("train NAME", "module:command", "help line")` adds one at the top or under
    a core group (`train`, `eval`, `data`, `model`, `serve`), imported only when it runs
    (see `studio_align.commands`).
    """


@hookspec
def studio_align_register_tasks(register: Callable[..., None]) -> None:
    """Register trainable tasks: `register(TaskSpec | factory, name=None, description=None)`.

    A factory takes no arguments and returns an object satisfying `studio_align.tasks.Task`
    (built on first use). Built-in: `router`, `grading`; `train sft|dpo|kto|grpo` take
    `task = "NAME"` in the run config.
    """


@hookspec
def studio_align_register_bundle_classes(register: Callable[..., None]) -> None:
    """Allow model bundles to name these model and config classes: `register(cls, ...)`.

    `bundle.json` names its model and config classes as `module.QualName`; loading looks
    the names up among the engine's own decoder and the classes registered here, and
    never imports a module the file names. A model class is built as `cls(cfg, rngs=...)`
    and keeps its pydantic config as `.cfg` (see `studio_align.models.bundle`).
    """


@hookspec
def studio_align_on_metrics(
    run: str, step: int, metrics: Mapping[str, float], run_dir: str
) -> None:
    """Receive training metrics (loggers such as TensorBoard plug in here).

    `metrics` is a read-only mapping; `run_dir` is the run's directory ("" when unknown).
    An implementation names only the arguments it wants. Fired by `PluginHost.fire_metrics`.
    """


@hookspec
def studio_align_on_checkpoint(run: str, step: int, directory: str) -> None:
    """A checkpoint of `run` at `step` is on disk in `directory` (upload it, prune, ...)."""
