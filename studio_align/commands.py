"""What commands are made of: lazy command groups, the plugin command hook's `cli`, and
the run-config options every `train` subcommand shares.

Design choices:

* A `LazyGroup` names its subcommands as `"module:attribute"` references with their
  one-line help, and imports a command's module only when that command runs (or its own
  `--help` is asked for): `studio-align --help` lists every command without importing
  JAX, flax or any product.
* Plugins add commands through `studio_align_register_commands(cli)`. `cli` is a
  `PluginCommands`: a click group, so `@cli.command()` adds an ordinary top-level command
  (as with simonw/llm's `register_commands`), plus `cli.lazy("train grading",
  "pkg.commands:train_grading", "help")`, which adds a lazily imported command at the top
  or under one of the core groups (`train`, `eval`, `data`, `model`, `serve`). A product
  adds its commands this way, exactly as a third party does.
* What a plugin adds is kept per plugin host (the root group asks the invocation's host),
  so two invocations in one process with different `--plugin`s never see each other's
  commands.
* A command module imports only what its options need (click, JAX-free configs); the
  library functions its body calls are `deferred("module:attribute")` references,
  imported when the command runs. So a command's own `--help`, and an option it
  refuses, answer without importing JAX (`train sft --help`: 0.33 s against 2.5 s;
  `tests/test_plugins_cli.py::test_help_imports_no_jax` checks every command).
* This module sits below the products (click and the config loader only), so a
  product's `commands.py` can share `run_config_options` and `echo_result` without
  importing the CLI package above it.
"""

from __future__ import annotations

import importlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from studio_align.config import load_config
from studio_align.errors import PluginError

F = TypeVar("F", bound=Callable[..., Any])


def resolve(target: str) -> Any:
    """The object `"module:attribute"` names (the attribute may be dotted: `Class.method`),
    imported now."""
    module, _, path = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def deferred(target: str) -> Callable[..., Any]:
    """A stand-in for the function `target` names (`resolve`), imported on the first call:
    what a command's body calls, so that its module imports no JAX."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return resolve(target)(*args, **kwargs)

    call.__name__ = call.__qualname__ = target.rpartition(":")[2]
    call.__doc__ = f"`{target}`, imported when first called."
    return call


@dataclass(frozen=True)
class LazyCommand:
    """A command known by reference: imported from `target` (`"module:attribute"`) when run."""

    target: str
    help: str
    plugin: str | None = None  # None for studio-align's core commands

    def load(self, name: str) -> click.Command:
        owner = f"plugin {self.plugin!r}" if self.plugin else "studio-align"
        try:
            cmd = resolve(self.target)
        except (ImportError, AttributeError) as e:
            raise PluginError(
                f"command {name!r} ({owner}): cannot load {self.target}: {type(e).__name__}: {e}"
            ) from e
        if not isinstance(cmd, click.Command):
            raise PluginError(
                f"command {name!r} ({owner}): {self.target} is a {type(cmd).__name__}, "
                "not a click command"
            )
        return cmd


def plugin_commands(ctx: click.Context, path: tuple[str, ...]) -> Mapping[str, LazyCommand]:
    """Lazy commands plugins added under `path`, from the invocation's plugin host."""
    source = ctx.find_root().meta.get(PLUGIN_COMMANDS_KEY)
    return source(path) if source is not None else {}


PLUGIN_COMMANDS_KEY = "studio_align.plugin_commands"


class LazyGroup(click.Group):
    """A click group whose subcommands are imported only when used.

    `lazy` maps a name to its `LazyCommand`; `path` is the group's place under the root
    (`("train",)`), where the invocation's plugins may add more lazy commands.
    """

    def __init__(
        self,
        *args: Any,
        lazy: Mapping[str, LazyCommand] | None = None,
        path: tuple[str, ...] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, LazyCommand] = dict(lazy or {})
        self.path = path

    def eager_commands(self, ctx: click.Context) -> Mapping[str, click.Command]:
        """Commands already imported (the root adds the plugins' top-level ones)."""
        return self.commands

    def lazy_commands(self, ctx: click.Context) -> Mapping[str, LazyCommand]:
        """Commands known by reference: this group's own, then the plugins' under `path`."""
        return {**plugin_commands(ctx, self.path), **self.lazy}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.eager_commands(ctx), *self.lazy_commands(ctx)})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = self.eager_commands(ctx).get(cmd_name)
        if cmd is None:
            ref = self.lazy_commands(ctx).get(cmd_name)
            if ref is not None:
                cmd = ref.load(cmd_name)
                if ref.plugin is None:
                    self.commands[cmd_name] = cmd  # a core command: keep it
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list, from the stored help lines: nothing is imported for `--help`."""
        eager, lazy = self.eager_commands(ctx), self.lazy_commands(ctx)
        names = self.list_commands(ctx)
        width = formatter.width - 6 - max((len(n) for n in names), default=0)
        rows = []
        for name in names:
            cmd = eager.get(name)
            if cmd is None:
                rows.append((name, lazy[name].help))
            elif not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=width)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class PluginCommands(click.Group):
    """The `cli` a plugin's `studio_align_register_commands` receives.

    `@cli.command()`/`@cli.group()` add a top-level command; `cli.lazy(path, target, help)`
    adds one imported only when run, at the top (`"grade"`) or under a core group
    (`"train grading"`).
    """

    def __init__(self, plugin: str) -> None:
        super().__init__(name="studio-align")
        self.plugin = plugin
        self.lazy_commands: dict[tuple[str, ...], LazyCommand] = {}

    def lazy(self, path: str, target: str, help: str) -> None:
        """Add the command `path` (`"NAME"` or `"GROUP NAME"`), loaded from `target`."""
        parts = tuple(path.split())
        where = f"plugin {self.plugin!r}, hook studio_align_register_commands"
        if not 1 <= len(parts) <= 2 or ":" not in target:
            raise PluginError(
                f"{where}: cli.lazy({path!r}, {target!r}): expected 'NAME' or 'GROUP NAME' "
                "and a 'module:attribute' target"
            )
        if parts in self.lazy_commands or (len(parts) == 1 and parts[0] in self.commands):
            raise PluginError(f"{where}: command {path!r} added twice")
        self.lazy_commands[parts] = LazyCommand(target, help, plugin=self.plugin)


# -- what every `train` subcommand shares ------------------------------------------------------


def run_config_options(f: F) -> F:
    """`--config RUN.toml`, repeatable `--set key=value`, and `--json`."""
    f = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")(f)
    f = click.option(
        "--set", "overrides", multiple=True, metavar="KEY=VALUE",
        help="Override a config key, e.g. --set optim.learning_rate=1e-3 (repeatable).",
    )(f)  # fmt: skip
    f = click.option(
        "--config", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
        help="Run config (TOML).",
    )(f)  # fmt: skip
    return f


def load_run_config(model: type, config: Path | None, overrides: tuple[str, ...]) -> Any:
    """The run config `model` from `--config` and `--set` (errors name the key)."""
    return load_config(model, config, overrides)


def echo_result(payload: dict[str, Any], as_json: bool) -> None:
    """Print a command's result: `key: value` lines, or JSON with `--json`."""
    if as_json:
        click.echo(json.dumps(payload, indent=2, ensure_ascii=False, default=str))
        return
    for k, v in payload.items():
        if isinstance(v, dict):
            inner = "  ".join(
                f"{a}={b:.4g}" if isinstance(b, float) else f"{a}={b}" for a, b in v.items()
            )
            click.echo(f"{k}: {inner}")
        else:
            click.echo(f"{k}: {v}")


class FiniteRange(click.FloatRange):
    """A float option within bounds that also refuses `nan` and `inf`, which pass
    `click.FloatRange` (every comparison with NaN is false) and then silently poison a
    run: `generate --guidance nan` wrote black images and exited 0. A refusal is one
    `Error:` line naming the option (exit code 2), like every other bad input."""

    name = "finite float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        where = f"--{param.name.replace('_', '-')}" if param is not None and param.name else "value"
        try:
            number = super().convert(value, param, ctx)
        except click.BadParameter as e:
            raise BadValue(f"{where}: {e.message}") from None
        if not math.isfinite(number):
            raise BadValue(f"{where}: {value!r} is not a finite number")
        return number


class BadValue(click.ClickException):
    """An option's value refused before the command runs: `Error: <one line>`, exit 2."""

    exit_code = 2
