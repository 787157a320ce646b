"""A small module's state as one `.npz` of its leaves in tree order.

For the models too small to need a bundle (the grading policy, the preference reward
model): their metadata file says which architecture to build, and the leaves fill it.
A truncated or foreign file, or one that does not fit the architecture, is a
`CheckpointError` naming it; a missing one stays the `FileNotFoundError` it is, for the
caller to say what the folder should have held.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.errors import CheckpointError


def save_state_npz(module: Any, path: str | Path) -> Path:
    """Write `module`'s state leaves to `path` (`arr_0`, `arr_1`, ... in tree order)."""
    np.savez(path, *[np.asarray(x) for x in jax.tree.leaves(nnx.state(module))])
    return Path(path)


def load_state_npz(module: Any, path: str | Path, *, built_from: str) -> None:
    """Fill `module` (built from the metadata file `built_from`) with the leaves at `path`."""
    try:
        with np.load(path) as arrays:
            loaded = [arrays[f"arr_{i}"] for i in range(len(arrays.files))]
    except FileNotFoundError:
        raise
    except (KeyError, ValueError, OSError, zipfile.BadZipFile) as e:  # truncated, or not .npz
        raise CheckpointError(f"{path}: unreadable ({e})") from None
    leaves, treedef = jax.tree.flatten(nnx.state(module))
    if len(loaded) != len(leaves) or any(
        a.shape != b.shape for a, b in zip(loaded, leaves, strict=True)
    ):
        raise CheckpointError(f"{path}: does not match the architecture in {built_from}")
    nnx.update(module, jax.tree.unflatten(treedef, [jnp.asarray(a) for a in loaded]))
