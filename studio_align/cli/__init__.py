"""The `studio-align` command line (click).

Thin by design: every command parses options, calls one library function and prints.

Design choices:

* `main` is a `StudioAlignGroup`: its repeatable `--plugin MODULE_OR_FILE.py` option is
  eager, so those plugins are loaded (together with built-ins, entry points and
  `STUDIO_ALIGN_PLUGINS`) before click resolves the subcommand; commands that plugins
  add through `studio_align_register_commands` are therefore callable and listed in
  `--help`. The host built for an invocation is the process default (`get_host()`)
  for its duration and the previous default is restored afterwards.
* Errors become a one-line `Error: ...` here, and only here (`cli_errors`), with
  `STUDIO_ALIGN_DEBUG=1` letting the traceback through instead. Exit code 2 for every
  cause a user can act on: a `StudioAlignError` (bad config, data, checkpoint, plugin),
  an `OSError` (read-only or full disk, a directory where a file belongs, a missing or
  unreadable file: the message names the path and the system's reason) and a
  `UnicodeDecodeError` (a file that is not UTF-8). Anything else is a bug: exit code 1,
  still one line, asking for a report.
* Commands load lazily: the root and the core groups (`train`, `eval`, `data`, `model`,
  `serve`) are `LazyGroup`s naming each command as `"module:attribute"` with its help
  line (`CORE_COMMANDS`, `CORE_SUBCOMMANDS`), so `studio-align --help` imports neither
  JAX nor any product. The core knows only the core verbs and the engine's own trainers;
  each product adds its commands through `studio_align_register_commands` from its
  `plugin.py`, exactly as a third party does.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import click

from studio_align import __version__
from studio_align.cli.config_cmd import attach_config_help
from studio_align.commands import PLUGIN_COMMANDS_KEY, LazyCommand, LazyGroup
from studio_align.errors import PluginError, StudioAlignError
from studio_align.plugins import PluginHost, set_host, using_host

DEBUG_ENV = "STUDIO_ALIGN_DEBUG"
_SPECS_KEY = "studio_align.plugin_specs"
_HOST_KEY = "studio_align.host"
# a full or read-only disk: orbax's background save threads are still failing, one
# traceback each, so the process ends at once after the one-line error (see `main`)
_DISK_ERRNOS = (errno.ENOSPC, errno.EROFS, errno.EDQUOT)
_disk_failed = False


def _own_process() -> bool:
    """Whether this process is the `studio-align` command (not a test runner calling `main`)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", "")
    return name in ("studio_align.__main__", "studio_align.cli.__main__") or (
        os.path.basename(sys.argv[0] if sys.argv else "") == "studio-align"
    )


class _NoBackgroundTracebacks(logging.Filter):
    """Drop the `absl` (orbax) records that carry a traceback: a checkpoint save failing
    in a background thread; the same failure reaches the main thread and becomes the one
    `Error:` line. `STUDIO_ALIGN_DEBUG=1` shows them."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.exc_info is None and record.stack_info is None


_CLI = "studio_align.cli"

# top-level core verbs: name -> (target, help line)
CORE_COMMANDS: dict[str, tuple[str, str]] = {
    "autotune": (f"{_CLI}.autotune_cmd:autotune", "Run the experiment loop over a search space."),
    "config": (
        f"{_CLI}.config_cmd:config",
        "Run configs: every key, its default and what it means.",
    ),
    "plugins": (f"{_CLI}.plugins_cmd:plugins", "Inspect the loaded plugins."),
    "quickstart": (
        f"{_CLI}.quickstart_cmd:quickstart",
        "Simulate a platform and tune every product on it.",
    ),
}
# core groups, which plugins may add subcommands to: name -> (help, {subcommand: (target, help)})
CORE_SUBCOMMANDS: dict[str, tuple[str, dict[str, tuple[str, str]]]] = {
    "data": (
        "Creator logs: validate, compile into datasets.",
        {
            "validate": (f"{_CLI}.data_cmd:validate_cmd", "Check creator logs line by line."),
            "compile": (f"{_CLI}.data_cmd:compile_cmd", "Compile creator logs into datasets."),
        },
    ),
    "train": (
        "Train a model from a run config (TOML, with `--set key=value` overrides).",
        {
            "sft": (f"{_CLI}.train_cmd:sft", "Supervised fine-tuning of a task."),
            "dpo": (f"{_CLI}.train_pref_cmd:dpo", "Direct preference optimisation of a task."),
            "kto": (f"{_CLI}.train_pref_cmd:kto", "KTO on desirable/undesirable examples."),
            "grpo": (f"{_CLI}.train_pref_cmd:grpo", "GRPO against registered rewards."),
            "ppo": (
                f"{_CLI}.train_rl_cmd:ppo",
                "PPO with a learned critic against registered rewards.",
            ),
            "distill": (
                f"{_CLI}.train_rl_cmd:distill",
                "Distil a teacher's token distributions into a student.",
            ),
        },
    ),
    "eval": ("Evaluate trained models.", {}),
    "model": (
        "Model bundles and Hugging Face checkpoints.",
        {
            "inspect-hf": (f"{_CLI}.model_cmd:inspect_hf", "Describe a Hugging Face checkpoint."),
            "export-hf": (f"{_CLI}.model_cmd:export_hf_cmd", "Export a bundle to Hugging Face."),
        },
    ),
    "serve": (
        "Serve tuned models over HTTP.",
        {"router": (f"{_CLI}.serve_cmd:serve_router", "Serve a router checkpoint over HTTP.")},
    ),
}


class CliError(click.ClickException):
    """A `StudioAlignError` as click shows it: `Error: <one line>`, exit code 2."""

    exit_code = 2


class InternalError(click.ClickException):
    """An unexpected exception (a bug): one line and exit code 1."""

    exit_code = 1


def _debug() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _one_line(text: str) -> str:
    return "; ".join(line.strip() for line in str(text).splitlines() if line.strip())


def os_error_message(e: OSError) -> str:
    """`PATH: reason` for an OSError, with a hint for the causes a user can fix."""
    reason = e.strerror or _one_line(str(e)) or type(e).__name__
    if e.errno == errno.EEXIST and e.filename is not None and os.path.isfile(e.filename):
        reason = "a file, where a folder is needed"
    hints = {
        errno.ENOSPC: " (the disk is full: free space and run again; a run resumes)",
        errno.EROFS: " (read-only file system: choose a writable output folder)",
        errno.EACCES: " (permission denied)",
    }
    where = e.filename if e.filename is not None else None
    text = f"{where}: {reason}" if where is not None else reason
    if e.filename2 is not None:
        text += f" (-> {e.filename2})"
    return text + hints.get(e.errno or 0, "")


@contextlib.contextmanager
def cli_errors() -> Iterator[None]:
    """Turn every error into a one-line `click` error (unless `STUDIO_ALIGN_DEBUG=1`)."""
    try:
        yield
    except click.ClickException:
        raise
    except StudioAlignError as e:
        if _debug():
            raise
        raise CliError(_one_line(str(e)) or type(e).__name__) from e
    except OSError as e:
        if _debug():
            raise
        if e.errno in _DISK_ERRNOS:
            global _disk_failed
            _disk_failed = True
        raise CliError(os_error_message(e)) from e
    except UnicodeDecodeError as e:
        if _debug():
            raise
        raise CliError(
            f"a file is not valid UTF-8 (byte {e.start}: {e.reason}); logs, configs and "
            "datasets must be UTF-8"
        ) from e
    except (click.exceptions.Exit, click.Abort, KeyboardInterrupt):
        raise
    except Exception as e:
        if _debug():
            raise
        raise InternalError(
            f"internal error: {type(e).__name__}: {_one_line(str(e))[:500]} "
            f"(a bug: please report it; {DEBUG_ENV}=1 shows the traceback)"
        ) from e


class StudioAlignGroup(LazyGroup):
    """Root group: loads plugins before resolving subcommands; maps errors to exit 2."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        quiet = None if _debug() else _NoBackgroundTracebacks()
        if quiet is not None:
            logging.getLogger("absl").addFilter(quiet)
        try:
            with using_host(None):
                return super().main(*args, **kwargs)
        except SystemExit as e:
            if _disk_failed and not _debug() and _own_process():  # skip waiting on failing saves
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(e.code if isinstance(e.code, int) else 2)
            raise
        finally:
            if quiet is not None:
                logging.getLogger("absl").removeFilter(quiet)

    def host(self, ctx: click.Context) -> PluginHost:
        """The plugin host of this invocation, built on first use."""
        root = ctx.find_root()
        host = root.meta.get(_HOST_KEY)
        if host is None:
            with cli_errors():
                host = PluginHost.default(root.meta.get(_SPECS_KEY, ()))
                _check_clashes(host)
            set_host(host)
            root.meta[_HOST_KEY] = host
            root.meta[PLUGIN_COMMANDS_KEY] = host.commands_under
        return host

    def eager_commands(self, ctx: click.Context) -> Mapping[str, click.Command]:
        return {**self.host(ctx).commands, **self.commands}

    def lazy_commands(self, ctx: click.Context) -> Mapping[str, LazyCommand]:
        self.host(ctx)
        return super().lazy_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        with cli_errors():
            return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        with cli_errors():
            return super().invoke(ctx)


def _load_plugins(ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> None:
    ctx.meta[_SPECS_KEY] = tuple(value)
    assert isinstance(ctx.command, StudioAlignGroup)
    ctx.command.host(ctx)


@click.group(
    cls=StudioAlignGroup,
    lazy={name: LazyCommand(target, text) for name, (target, text) in CORE_COMMANDS.items()},
)
@click.option(
    "--plugin",
    multiple=True,
    metavar="MODULE_OR_FILE.py",
    is_eager=True,
    expose_value=False,
    callback=_load_plugins,
    help="Load a plugin module or .py file (repeatable; before the subcommand).",
)
@click.version_option(__version__, prog_name="studio-align")
def main() -> None:
    """Alignment SDK for creative platforms."""


class _TrainGroup(LazyGroup):
    """`train`: each subcommand's `--help` ends with its run config's keys."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None:
            attach_config_help(cmd_name, cmd)
        return cmd


for _name, (_help, _subcommands) in CORE_SUBCOMMANDS.items():
    main.add_command(
        (_TrainGroup if _name == "train" else LazyGroup)(
            _name,
            help=_help,
            lazy={n: LazyCommand(target, text) for n, (target, text) in _subcommands.items()},
            path=(_name,),
        )
    )


def _check_clashes(host: PluginHost) -> None:
    """Plugin commands may not shadow core ones; `GROUP NAME` needs a core group."""
    core = set(main.commands) | set(main.lazy)
    clash = sorted(set(host.commands) & core)
    for path in host.lazy_commands:
        if len(path) == 1 and path[0] in core:
            clash.append(path[0])
        elif len(path) == 2:
            group = main.commands.get(path[0])
            if not isinstance(group, LazyGroup):
                raise PluginError(
                    f"plugin {host.command_owner(' '.join(path))!r}: command {' '.join(path)!r}: "
                    f"no core group {path[0]!r} (groups: {', '.join(sorted(CORE_SUBCOMMANDS))})"
                )
            if path[1] in group.lazy or path[1] in group.commands:
                clash.append(" ".join(path))
    if clash:
        owners = ", ".join(f"{c!r} (plugin {host.command_owner(c)})" for c in sorted(clash))
        raise PluginError(f"plugin command(s) {owners} clash with built-in commands")
