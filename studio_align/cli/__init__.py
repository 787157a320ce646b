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
* Command modules: each command group lives in `studio_align/cli/<x>_cmd.py` and is
  listed once in `COMMAND_MODULES`. A module either decorates its command with
  `@main.command(...)`/`@main.group(...)` or exports a click command named after the
  module without `_cmd` (`data_cmd.data`). A listed module that does not exist yet is
  skipped; any other import error is raised, never hidden.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

import click

from studio_align import __version__
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


# Command modules (studio_align/cli/<name>.py), imported in this order if present.
COMMAND_MODULES: list[str] = [
    "plugins_cmd",
    "data_cmd",
    "train_cmd",
    "eval_cmd",
    "serve_cmd",
    "autotune_cmd",
    "quickstart_cmd",
    "model_cmd",
    "flow_cmd",
    "grading_cmd",
    "config_cmd",
]


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


class StudioAlignGroup(click.Group):
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
                clash = sorted(set(host.commands) & set(self.commands))
                if clash:
                    owners = ", ".join(f"{c!r} (plugin {host.command_owner(c)})" for c in clash)
                    raise PluginError(f"plugin command(s) {owners} clash with built-in commands")
            set_host(host)
            root.meta[_HOST_KEY] = host
        return host

    def list_commands(self, ctx: click.Context) -> list[str]:
        with cli_errors():
            return sorted({*super().list_commands(ctx), *self.host(ctx).commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is None:
            cmd = self.host(ctx).commands.get(cmd_name)
        return cmd

    def invoke(self, ctx: click.Context) -> Any:
        with cli_errors():
            return super().invoke(ctx)


def _load_plugins(ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> None:
    ctx.meta[_SPECS_KEY] = tuple(value)
    assert isinstance(ctx.command, StudioAlignGroup)
    ctx.command.host(ctx)


@click.group(cls=StudioAlignGroup)
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


def _register_subcommands(
    group: click.Group | None = None,
    *,
    package: str = __name__,
    modules: list[str] | None = None,
) -> None:
    """Import every present module of `COMMAND_MODULES` and add its command to `main`."""
    group = main if group is None else group
    for stem in COMMAND_MODULES if modules is None else modules:
        modname = f"{package}.{stem}"
        before = set(group.commands)
        try:
            module = importlib.import_module(modname)
        except ModuleNotFoundError as e:
            if e.name == modname:
                continue  # not written yet
            raise
        cmd = getattr(module, stem.removesuffix("_cmd"), None)
        if isinstance(cmd, click.Command):
            if group.commands.get(cmd.name or "") is not cmd:
                group.add_command(cmd)
        elif set(group.commands) == before and not any(
            isinstance(v, click.Command) and group.commands.get(v.name or "") is v
            for v in vars(module).values()
        ):
            raise RuntimeError(
                f"{modname} defines no command: decorate one with @main.command/@main.group "
                f"or export a click command named {stem.removesuffix('_cmd')!r}"
            )


_register_subcommands()
