"""Reference log-probabilities, computed once per (reference model, dataset) and cached.

DPO and KTO compare the policy with a frozen reference. Its log-probs never change, so
they are computed in one pass before training and stored as an `.npz` under the cache
directory, named by a digest of *both* the reference's parameters and the dataset's
token arrays (plus a `kind` tag naming what was computed). A different reference
checkpoint or a changed dataset therefore gets a different file: a stale cache can never
be read. The digest is also stored inside the file and checked on load.

Design choices:
- Digests hash raw bytes with BLAKE2b (fast, about 1 GB/s), with every array's path,
  dtype and shape mixed in, so a reshaped or retyped tensor hashes differently.
- Files are written to a temporary name and renamed, so an interrupted run leaves no
  half-written cache that a later run would trust.
- `batched_apply` runs a jitted function over the dataset in fixed-size chunks (the last
  one padded), so the pass compiles once whatever the dataset size; every chunk is
  dispatched before any result is fetched, so host slicing overlaps the device work
  and the pass runs at the step's throughput (no host round trip per chunk).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np

from studio_align.errors import DataError
from studio_align.training.distributed import is_main_process

CACHE_VERSION = "1"


def _update(h: Any, name: str, x: Any) -> None:
    arr = np.asarray(jax.device_get(x))
    h.update(f"{name}|{arr.dtype.str}|{arr.shape}|".encode())
    h.update(np.ascontiguousarray(arr).tobytes())


def tree_digest(tree: Any) -> str:
    """Digest of a pytree of arrays (e.g. `nnx.state(model, nnx.Param)`), path-aware."""
    h = hashlib.blake2b(digest_size=16)
    leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
    for path, leaf in leaves:
        if hasattr(leaf, "dtype") and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        _update(h, jax.tree_util.keystr(path), leaf)
    return h.hexdigest()


def arrays_digest(arrays: Mapping[str, Any]) -> str:
    """Digest of named arrays (a tokenised dataset), independent of dict order."""
    h = hashlib.blake2b(digest_size=16)
    for name in sorted(arrays):
        _update(h, name, arrays[name])
    return h.hexdigest()


def cache_key(*, kind: str, reference: str, dataset: str) -> str:
    return hashlib.blake2b(
        f"v{CACHE_VERSION}|{kind}|{reference}|{dataset}".encode(), digest_size=16
    ).hexdigest()


def cached_arrays(
    cache_dir: str | os.PathLike[str] | None,
    *,
    kind: str,
    reference: str,
    dataset: str,
    compute: Callable[[], Mapping[str, np.ndarray]],
) -> tuple[dict[str, np.ndarray], Path | None, bool]:
    """Load `{name: array}` for this (kind, reference, dataset) or compute and save it.

    Returns `(arrays, path, hit)`; with `cache_dir=None` nothing is stored.
    """
    key = cache_key(kind=kind, reference=reference, dataset=dataset)
    if cache_dir is None:
        return {k: np.asarray(v) for k, v in compute().items()}, None, False
    directory = Path(cache_dir)
    path = directory / f"{kind}-{key}.npz"
    if path.exists():
        try:
            with np.load(path) as f:
                stored = str(f["__key__"])
                if stored == key:
                    return {k: f[k] for k in f.files if k != "__key__"}, path, True
        except (OSError, ValueError, KeyError) as e:
            raise DataError(f"{path}: unreadable reference cache ({e}); delete it") from e
    arrays = {k: np.asarray(v) for k, v in compute().items()}
    if not is_main_process():  # every process computed the same; process 0 writes it
        return arrays, path, False
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".npz.tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            payload: dict[str, Any] = {"__key__": np.asarray(key), **arrays}
            np.savez(f, **payload)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return arrays, path, False


def batched_apply(
    fn: Callable[[Any], Mapping[str, Any]],
    arrays: Mapping[str, np.ndarray],
    *,
    batch_size: int,
) -> dict[str, np.ndarray]:
    """Apply a (jitted) `fn` to fixed-size row chunks of `arrays`; concatenate the outputs."""
    n = len(next(iter(arrays.values())))
    pending: list[tuple[int, Mapping[str, Any]]] = []
    for start in range(0, n, batch_size):
        chunk = {k: v[start : start + batch_size] for k, v in arrays.items()}
        m = len(next(iter(chunk.values())))
        if m < batch_size:  # pad by repeating row 0: a static shape, results dropped
            chunk = {
                k: np.concatenate([v, np.repeat(v[:1], batch_size - m, axis=0)])
                for k, v in chunk.items()
            }
        # dispatched, not awaited: the host slices the next chunk while this one runs
        pending.append((m, fn(chunk)))
    outs: dict[str, list[np.ndarray]] = {}
    for m, out in jax.device_get(pending):
        for k, v in out.items():
            outs.setdefault(k, []).append(np.asarray(v)[:m])
    return {k: np.concatenate(v) for k, v in outs.items()}
