"""Flow generator weights as one safetensors file; the architecture rides in its metadata.

A checkpoint is a directory with `model.safetensors` (or the file itself). Names are the
NNX state paths joined with dots (`blocks.0.attn.query.kernel`); the metadata holds
`flow_arch` (the architecture's name in `ARCHITECTURES`; absent = `dit`), `flow_config`
(JSON of its config) and free-form provenance (`trained_by`, metrics). The pretrained
base ships as package data, and every function that takes a checkpoint path also takes
its name (`PACKAGED`): `base` (32x32, `BASE_WEIGHTS`) and `base64` (64x64, `BASE64_WEIGHTS`).

Any `models.flow_protocol.FlowModel` can be saved and loaded once its (config class,
module class) pair is registered under a name: `register_flow_architecture("mine",
MyConfig, MyModel)` (the config rebuilds from its `to_dict()` as keyword arguments, the
module from `MyModel(config, rngs=nnx.Rngs(0))`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.errors import CheckpointError
from studio_align.models.flow import FlowConfig, FlowDiT
from studio_align.models.flow_protocol import FlowModel
from studio_align.models.flow_unet import FlowUNet, UNetConfig
from studio_align.models.safetensors_io import SafetensorsFile, save_safetensors

BASE_WEIGHTS = Path(__file__).parent / "weights" / "base.safetensors"
BASE64_WEIGHTS = Path(__file__).parent / "weights" / "base64.safetensors"
PACKAGED = {"base": BASE_WEIGHTS, "base64": BASE64_WEIGHTS}
FILE = "model.safetensors"

# architecture name -> (config class, module class)
ARCHITECTURES: dict[str, tuple[type, type]] = {
    "dit": (FlowConfig, FlowDiT),
    "unet": (UNetConfig, FlowUNet),
}


def register_flow_architecture(name: str, config_cls: type, model_cls: type) -> None:
    """Make checkpoints of `model_cls` (a `FlowModel` built as `model_cls(config,
    rngs=...)`) savable and loadable under `name`."""
    known = ARCHITECTURES.get(name)
    if known is not None and known != (config_cls, model_cls):
        raise CheckpointError(f"flow architecture {name!r} is already {known[1].__name__}")
    ARCHITECTURES[name] = (config_cls, model_cls)


def architecture_of(model: Any) -> str:
    for name, (_, cls) in ARCHITECTURES.items():
        if type(model) is cls:
            return name
    raise CheckpointError(
        f"{type(model).__name__}: not a registered flow architecture "
        f"(known: {', '.join(ARCHITECTURES)}; see register_flow_architecture)"
    )


def _flat(model: Any) -> dict[str, Any]:
    return {
        ".".join(str(p) for p in path): var for path, var in nnx.to_flat_state(nnx.state(model))
    }


def save_flow(model: FlowModel, path: str | Path, meta: Mapping[str, Any] | None = None) -> Path:
    """Write `model` to `path` (a `.safetensors` file, or a directory holding `FILE`)."""
    p = Path(path)
    target = p if p.suffix == ".safetensors" else p / FILE
    tensors = {k: np.asarray(v.value, np.float32) for k, v in _flat(model).items()}
    metadata = {"flow_arch": json.dumps(architecture_of(model)),
                "flow_config": json.dumps(model.cfg.to_dict())}  # fmt: skip
    metadata.update({k: json.dumps(v) for k, v in (meta or {}).items()})
    return save_safetensors(tensors, target, metadata)


def _resolve(path: str | Path) -> Path:
    p = PACKAGED.get(str(path)) or Path(path)
    if p.is_dir():
        p = p / FILE
    if not p.is_file():
        raise CheckpointError(f"{path}: no flow checkpoint ({FILE} or a .safetensors file)")
    return p


def load_flow(path: str | Path = BASE_WEIGHTS) -> tuple[Any, dict[str, Any]]:
    """The model stored at `path` and its metadata (decoded JSON values)."""
    p = _resolve(path)
    f = SafetensorsFile(p)
    raw = f.metadata or {}
    if "flow_config" not in raw:
        raise CheckpointError(f"{p}: safetensors metadata has no flow_config")
    meta: dict[str, Any] = {}
    for k, v in raw.items():
        try:
            meta[k] = json.loads(v)
        except ValueError:
            raise CheckpointError(f"{p}: metadata {k!r} is not JSON: {v[:80]!r}") from None
    arch = meta.get("flow_arch", "dit")
    if arch not in ARCHITECTURES:
        raise CheckpointError(
            f"{p}: flow_arch {arch!r} is not registered (known: {', '.join(ARCHITECTURES)})"
        )
    config_cls, model_cls = ARCHITECTURES[arch]
    stored = meta["flow_config"]
    try:
        if not isinstance(stored, dict):
            raise TypeError(f"{stored!r} is not a JSON object")
        model = model_cls(config_cls(**stored), rngs=nnx.Rngs(0))
    except (TypeError, ValueError) as e:  # an unknown key, or a value of the wrong type
        raise CheckpointError(
            f"{p}: flow_config does not build a {model_cls.__name__} "
            f"({type(e).__name__}: {str(e).splitlines()[0][:200]})"
        ) from None
    flat = _flat(model)
    missing = sorted(set(flat) - set(f.names))
    if missing:
        raise CheckpointError(f"{p}: missing tensors {missing[:3]} for the stored flow_config")
    for name, var in flat.items():
        a = f.get(name)
        if a.shape != var.value.shape:
            raise CheckpointError(
                f"{p}: tensor {name} has shape {a.shape}, expected {var.value.shape}"
            )
        var.value = jnp.asarray(a, var.value.dtype)
    return model, meta


def clone(model: Any) -> Any:
    """An independent copy (a frozen reference next to the trained policy)."""
    graphdef, state = nnx.split(model)
    return nnx.merge(graphdef, jax.tree.map(jnp.array, state))
