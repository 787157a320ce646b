"""Orbax checkpoints of a training run: keep N, save every K steps, resume exactly.

Design choices:
- A checkpoint holds named pytrees (trainable params, the model's other variables,
  optimizer state) plus a JSON record (step, data-iterator position, RNG seed, config
  digest, metrics). Everything needed to continue the run bit for bit.
- Trees are saved flattened, as `{"leaf_00000": array, ...}`, with the leaves' key
  paths in the JSON record. Restoring fills the *current* run's tree structure, with the
  current shardings, and refuses a checkpoint whose paths or shapes differ, with a
  message that names the first mismatch. This keeps orbax away from NNX/optax container
  types and makes a changed model a clear `CheckpointError`, not a silent partial load.
- Typed PRNG keys (an `nnx.Rngs` in the model) are stored as their raw key data.
- Saves are asynchronous by default; `wait()` blocks until the last one is on disk.
- **A corrupt latest checkpoint falls back to the previous good one.** `restore(step)`
  tries `step`, then each older step, newest first. A step that cannot be read (torn
  JSON record, truncated arrays, a kill during a save) is reported (a warning and
  `Checkpointer.fallbacks`), moved aside to `<step>.corrupt` so later saves and
  `latest_step` ignore it, and the run continues from the newest step that restores.
  A checkpoint that reads fine but does not fit the model (`paths`/`shapes` differ) is
  not corruption: that is a `CheckpointError` at once, never a silent fall back.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from studio_align.errors import CheckpointError
from studio_align.training.run_config import CheckpointConfig as CheckpointConfig

log = logging.getLogger("studio_align.training")


class _Unreadable(Exception):
    """A step's files cannot be read back (as opposed to not fitting the model)."""


def _is_key(x: Any) -> bool:
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _flatten(tree: Any) -> tuple[list[str], list[Any]]:
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [jax.tree_util.keystr(p) for p, _ in flat], [x for _, x in flat]


class Checkpointer:
    """A thin wrapper over `ocp.CheckpointManager` for `{name: pytree}` train states."""

    def __init__(self, directory: str | Path, *, every: int, keep: int, async_save: bool = True):
        self.directory = Path(directory).absolute()
        self.every = every
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep,
            create=True,
            enable_async_checkpointing=async_save,
            # a save cut short (full disk, kill) leaves `<step>.orbax-checkpoint-tmp`; it is
            # never taken for a step, and is cleared here so the step can be saved again
            cleanup_tmp_directories=True,
        )
        self._mgr = ocp.CheckpointManager(self.directory, options=options)
        self.fallbacks: list[str] = []  # one line per corrupt step skipped on restore

    def latest_step(self) -> int | None:
        return self._mgr.latest_step()

    def all_steps(self) -> list[int]:
        return list(self._mgr.all_steps())

    def should_save(self, step: int, *, final: bool = False) -> bool:
        return final or (self.every > 0 and step % self.every == 0)

    def save(self, step: int, trees: Mapping[str, Any], record: Mapping[str, Any]) -> None:
        """Save `trees` (name -> pytree of arrays) and a JSON `record` as step `step`."""
        items: dict[str, Any] = {}
        paths: dict[str, list[str]] = {}
        shapes: dict[str, list[list[int]]] = {}
        for name, tree in trees.items():
            keys, leaves = _flatten(tree)
            paths[name] = keys
            shapes[name] = [list(np.shape(x)) for x in leaves]
            items[name] = {
                f"leaf_{i:05d}": (jax.random.key_data(x) if _is_key(x) else x)
                for i, x in enumerate(leaves)
            }
        meta = {"record": dict(record), "paths": paths, "shapes": shapes}
        # orbax refuses empty trees (a model with no non-trainable variables)
        args = {n: ocp.args.StandardSave(v) for n, v in items.items() if v}
        args["meta"] = ocp.args.JsonSave(meta)
        with self._storage_errors(f"saving step {step}"):  # an earlier async save fails here
            self._mgr.save(step, args=ocp.args.Composite(**args), force=True)

    def restore(self, step: int, like: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Restore step `step` (or, if it is corrupt, the newest older step that restores)
        into trees shaped and sharded like `like`; return (trees, record)."""
        candidates = sorted({s for s in self.all_steps() if s < step} | {step}, reverse=True)
        problems: list[str] = []
        for s in candidates:
            try:
                out = self._restore_step(s, like)
            except _Unreadable as e:
                problem = f"{self.directory}/{s}: cannot restore ({e})"
                problems.append(problem)
                self.fallbacks.append(problem)
                log.warning("%s; trying the previous checkpoint", problem)
                self._set_aside(s)
                continue
            if s != step:
                log.warning("resuming from step %d, the newest checkpoint that restores", s)
            return out
        left = [s for s in candidates if (self.directory / str(s)).exists()]
        advice = (
            f"remove {self.directory} to start afresh"
            if left
            else "each is kept as <step>.corrupt; running again starts afresh"
        )
        raise CheckpointError(f"no checkpoint could be restored: {'; '.join(problems)} ({advice})")

    def _set_aside(self, step: int) -> None:
        """Rename a corrupt step folder to `<step>.corrupt` (orbax ignores that name)."""
        src = self.directory / str(step)
        if not src.exists():
            return
        dst = src.with_name(f"{step}.corrupt")
        n = 1
        while dst.exists():
            n += 1
            dst = src.with_name(f"{step}.corrupt{n}")
        try:
            src.rename(dst)
            self._mgr.reload()
        except OSError as e:
            log.warning("could not set aside %s: %s", src, e)

    def _restore_step(
        self, step: int, like: Mapping[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        try:
            meta = self._mgr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))[
                "meta"
            ]
            if not isinstance(meta, dict) or not isinstance(meta.get("paths"), dict):
                raise ValueError("its JSON record is missing or malformed")
            if not isinstance(meta.get("record"), dict):
                raise ValueError("its JSON record has no run record")
        except Exception as e:  # orbax raises many types for unreadable files
            raise _Unreadable(_first_line(e)) from e
        targets: dict[str, Any] = {}
        layouts: dict[str, Any] = {}
        for name, tree in like.items():
            keys, leaves = _flatten(tree)
            saved = meta["paths"].get(name)
            saved_shapes = meta.get("shapes", {}).get(name)
            now_shapes = [list(np.shape(x)) for x in leaves]
            if saved != keys or (saved_shapes is not None and saved_shapes != now_shapes):
                first = next(
                    (f"{a} != {b}" for a, b in zip(saved or [], keys, strict=False) if a != b),
                    None,
                ) or next(
                    (
                        f"{k}: saved shape {tuple(a)}, model has {tuple(b)}"
                        for k, a, b in zip(keys, saved_shapes or [], now_shapes, strict=False)
                        if a != b
                    ),
                    f"{len(saved or [])} saved leaves, {len(keys)} expected",
                )
                raise CheckpointError(
                    f"{self.directory}/{step}: '{name}' does not match this run's model/optimizer "
                    f"({first})"
                )
            layouts[name] = (jax.tree_util.tree_structure(tree), leaves)
            targets[name] = {f"leaf_{i:05d}": _abstract(x) for i, x in enumerate(leaves)}
        args = {n: ocp.args.StandardRestore(t) for n, t in targets.items() if t}
        _leftovers_to_debug_log()  # before: abandoned reads may fail while this one waits
        try:
            restored = self._mgr.restore(step, args=ocp.args.Composite(**args))
        except Exception as e:
            raise _Unreadable(_first_line(e)) from e
        out: dict[str, Any] = {}
        for name, (treedef, leaves) in layouts.items():
            got = restored[name] if leaves else {}
            new = []
            for i, x in enumerate(leaves):
                y = got[f"leaf_{i:05d}"]
                if _is_key(x):
                    y = jax.random.wrap_key_data(y, impl=jax.random.key_impl(x))
                new.append(y)
            out[name] = jax.tree_util.tree_unflatten(treedef, new)
        return out, meta["record"]

    def wait(self) -> None:
        with self._storage_errors("finishing a save"):
            self._mgr.wait_until_finished()

    def close(self) -> None:
        with self._storage_errors("finishing a save"):
            self._mgr.close()

    @contextlib.contextmanager
    def _storage_errors(self, what: str) -> Iterator[None]:
        """A full or read-only disk under orbax/tensorstore (which raise `ValueError`s
        with the OS error inside the text) becomes the `OSError` it is, naming the folder,
        so the CLI prints one line with its hint; any other failure is a `CheckpointError`."""
        try:
            yield
        except CheckpointError:
            raise
        except OSError as e:
            if e.filename is None:  # from a save thread: name the checkpoint folder
                raise OSError(e.errno, e.strerror, str(self.directory)) from None
            raise
        except Exception as e:
            text = str(e)
            for code in (errno.ENOSPC, errno.EROFS, errno.EDQUOT):
                if os.strerror(code) in text or f"os_error_code='{code}'" in text:
                    raise OSError(code, os.strerror(code), str(self.directory)) from None
            first = text.splitlines()[0][:200] if text else type(e).__name__
            raise CheckpointError(f"{self.directory}: {what} failed: {first}") from e


def _first_line(e: BaseException) -> str:
    """`Type: first line` of an orbax/tensorstore error, without the store spec it appends."""
    text = str(e).splitlines()[0] if str(e) else ""
    text = text.split(" See full TensorStore details")[0]
    return f"{type(e).__name__}: {text[:200]}"


def _closed_loop(exc: BaseException | None) -> bool:
    """A callback of an abandoned read, run by tensorstore after orbax closed its loop."""
    return isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed"


def _from_orbax(exc: BaseException | None) -> bool:
    tb = exc.__traceback__ if exc is not None else None
    while tb is not None:
        if "/orbax/" in tb.tb_frame.f_code.co_filename:
            return True
        tb = tb.tb_next
    return False


def _leftovers_to_debug_log() -> None:
    """Send to the debug log the tracebacks that a failed array read leaves behind.

    When one leaf cannot be read, orbax abandons the other reads: their callbacks fail
    on a closed event loop in tensorstore's threads (before `restore` raises, and after),
    and their coroutines or tasks are dropped with the same exception. Python and asyncio
    print each to stderr, hundreds of lines, although `restore` reports the failure once.
    So before the first array restore of a process, hooks and an `asyncio` log filter are
    installed (once) that log exactly those (a closed-loop `RuntimeError`, a dropped orbax
    coroutine, a never-retrieved orbax task) at debug level and pass every other error on
    to the previous hook unchanged.
    """
    if getattr(sys.excepthook, "_orbax_leftovers", False):
        return
    old_except, old_unraisable = sys.excepthook, sys.unraisablehook

    def excepthook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
        if _closed_loop(exc):
            log.debug("after a failed checkpoint read: %s: %s", kind.__name__, exc)
        else:
            old_except(kind, exc, tb)

    def unraisablehook(u: Any) -> None:
        code = getattr(u.object, "cr_code", None)  # a dropped coroutine of orbax's
        if _closed_loop(u.exc_value) or (code is not None and "/orbax/" in code.co_filename):
            log.debug("after a failed checkpoint read: %r", u.exc_value)
        else:
            old_unraisable(u)

    excepthook._orbax_leftovers = True  # type: ignore[attr-defined]
    sys.excepthook, sys.unraisablehook = excepthook, unraisablehook
    logging.getLogger("asyncio").addFilter(_LeftoverTasks())  # "never retrieved" tasks


class _LeftoverTasks(logging.Filter):
    """Drops asyncio's "... exception was never retrieved" records of abandoned reads."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        # asyncio's "Task (or _GatheringFuture) exception was never retrieved"
        never_retrieved = "exception was never retrieved" in str(record.msg).split("\n")[0]
        if never_retrieved and _from_orbax(exc):
            log.debug("after a failed checkpoint read: %r", exc)
            return False
        return True


def _abstract(x: Any) -> jax.ShapeDtypeStruct:
    if _is_key(x):
        data = jax.eval_shape(jax.random.key_data, x)
        return jax.ShapeDtypeStruct(data.shape, data.dtype, sharding=_sharding_of(x))
    return jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=_sharding_of(x))


def _sharding_of(x: Any) -> Any:
    s = getattr(x, "sharding", None)
    if s is None:  # a host value: restore onto the first local device
        return jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    if _is_key(x):
        # key data has one extra trailing dimension; keep it replicated there
        from jax.sharding import NamedSharding, PartitionSpec

        if isinstance(s, NamedSharding):
            return NamedSharding(s.mesh, PartitionSpec(*s.spec, None))
        return jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    return s
