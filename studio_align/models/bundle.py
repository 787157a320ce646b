"""Model bundles: the directory eval, serve and later training stages load a model from.

Layout of a bundle directory:

    bundle.json           format tag + version, model class, free-form `extra`
    model_config.json     the `ModelConfig` (LoRA settings included)
    params.safetensors    every model variable, keyed by its dotted path
    tokenizer.json        the tokenizer (when one was given)

Design choices:
- safetensors rather than an orbax tree: a bundle is a deployable artefact read by the
  router and the server on one host; orbax directories are for resumable training.
- Loading builds the module abstractly (`nnx.eval_shape`, no random init) and fills it
  from the file; missing, unexpected or mis-shaped tensors are a `CheckpointError` that
  names them, never a silent partial load.
- LoRA adapters (when the config has LoRA) are saved with the base weights, so a bundle
  rebuilds exactly the trained module; `models.lora.merge_lora` folds them if wanted.
- **A bundle never chooses code.** `bundle.json` names its model and config classes, but
  loading looks those names up in the plugin host's registry (`bundle_classes`: what
  plugins register through the `studio_align_register_bundle_classes` hook, the engine's
  decoder LM by the built-in `router` plugin); it never imports a module the file names. An unknown name is a `CheckpointError` that lists
  the registered ones, so a bundle from an untrusted source cannot run code on load.
- Every way a bundle can be broken (unreadable or invalid JSON, a config that does not
  validate, a truncated or corrupt safetensors file) is a `CheckpointError` naming the
  file, never a raw exception.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from pydantic import ValidationError

from studio_align.errors import CheckpointError
from studio_align.models.tokenizer import Tokenizer
from studio_align.plugins import get_host
from studio_align.textfiles import read_json

FORMAT = "studio-align/model-bundle"
VERSION = 1


def qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def bundle_classes(host: Any = None) -> dict[str, type]:
    """Name in `bundle.json` -> class: what plugins registered through
    `studio_align_register_bundle_classes` (the built-in `router` plugin registers the
    engine's decoder LM, `Transformer` and `ModelConfig`)."""
    return dict((host or get_host()).bundle_classes)


@dataclass
class ModelBundle:
    """What `load_model_bundle` returns."""

    model: nnx.Module
    tokenizer: Any | None
    config: Any
    extra: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None


def _key(path: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in path)


def _saveable(var: nnx.Variable) -> bool:
    value = var.get_value()
    return hasattr(value, "dtype") and not jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key)


def _host(value: Any) -> np.ndarray:
    a = np.asarray(jax.device_get(value))
    if a.dtype.kind == "V" or a.dtype.name == "bfloat16":  # no numpy-native dtype: store f32
        a = a.astype(np.float32)
    return np.ascontiguousarray(a)


def save_model_bundle(
    directory: str | Path,
    model: nnx.Module,
    tokenizer: Any | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write `model` (with its `cfg`), `tokenizer` and `extra` metadata to `directory`."""
    from safetensors.numpy import save_file

    cfg = getattr(model, "cfg", None)
    if cfg is None or not hasattr(cfg, "model_dump"):
        raise CheckpointError(
            f"save_model_bundle: {type(model).__name__} has no pydantic `cfg` to rebuild it from"
        )
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    tensors = {
        _key(path): _host(var.get_value())
        for path, var in nnx.to_flat_state(nnx.state(model))
        if _saveable(var)
    }
    save_file(tensors, str(d / "params.safetensors"))
    (d / "model_config.json").write_text(
        json.dumps(cfg.model_dump(mode="json"), indent=2), encoding="utf-8"
    )
    if tokenizer is not None:
        tokenizer.save(d / "tokenizer.json")
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "model_class": qualname(type(model)),
        "config_class": qualname(type(cfg)),
        "extra": extra or {},
    }
    (d / "bundle.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False), encoding="utf-8")
    return d


def _registered(meta_path: Path, meta: dict[str, Any], key: str, classes: dict[str, type]) -> Any:
    name = meta.get(key)
    cls = classes.get(name) if isinstance(name, str) else None
    if cls is None:
        known = ", ".join(sorted(classes))
        raise CheckpointError(
            f"{meta_path}: {key} {name!r} is not a registered bundle class (registered: {known})"
        )
    return cls


def _read_json(path: Path) -> Any:
    try:
        return read_json(path, CheckpointError)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: missing") from None
    except OSError as e:
        raise CheckpointError(f"{path}: unreadable ({e.strerror or e})") from None


def _kind(dtype: Any) -> str:
    """`float`, `int` or `bool`: a stored tensor may change precision, never kind."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return "bool"
    return "int" if np.issubdtype(dt, np.integer) else "float"


def _load_tensors(path: Path) -> dict[str, np.ndarray]:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        return load_file(str(path))
    except FileNotFoundError:
        raise CheckpointError(f"{path}: missing") from None
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{path}: truncated or corrupt safetensors file ({e})") from None


def load_model_bundle(directory: str | Path, *, host: Any = None) -> ModelBundle:
    """Rebuild the model, tokenizer and metadata saved by `save_model_bundle`.

    Classes are looked up in `bundle_classes(host)` (default: the process's plugin host)."""
    d = Path(directory)
    meta_path = d / "bundle.json"
    if not meta_path.is_file():
        raise CheckpointError(f"{d}: not a model bundle (no bundle.json)")
    meta = _read_json(meta_path)
    if not isinstance(meta, dict):
        raise CheckpointError(f"{meta_path}: not a JSON object")
    version = meta.get("version", 0)
    if meta.get("format") != FORMAT or not isinstance(version, int) or version > VERSION:
        raise CheckpointError(
            f"{meta_path}: unsupported bundle format {meta.get('format')!r} "
            f"version {meta.get('version')!r}"
        )
    classes = bundle_classes(host)
    cfg_cls = _registered(meta_path, meta, "config_class", classes)
    model_cls = _registered(meta_path, meta, "model_class", classes)
    cfg_path = d / "model_config.json"
    try:
        cfg = cfg_cls.model_validate(_read_json(cfg_path))
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<root>"
        raise CheckpointError(f"{cfg_path}: {where}: {first['msg']}") from None
    try:
        abstract = nnx.eval_shape(lambda: model_cls(cfg, rngs=nnx.Rngs(0)))
    except (ValueError, TypeError) as e:
        raise CheckpointError(f"{cfg_path}: cannot build {meta['model_class']}: {e}") from None
    graphdef, state = nnx.split(abstract)
    tensors = _load_tensors(d / "params.safetensors")
    flat = nnx.to_flat_state(state)
    expected = {_key(p) for p, v in flat if _saveable_abstract(v)}
    missing = sorted(expected - tensors.keys())
    unexpected = sorted(tensors.keys() - expected)
    if missing or unexpected:
        raise CheckpointError(
            f"{d}/params.safetensors does not fit {meta['model_class']}: "
            f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
            f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}"
        )
    for path, var in flat:
        k = _key(path)
        if k not in tensors:
            continue
        want = var.get_value()
        got = tensors[k]
        if tuple(got.shape) != tuple(want.shape):
            raise CheckpointError(
                f"{d}/params.safetensors: {k} has shape {got.shape}, the config needs {want.shape}"
            )
        if _kind(got.dtype) != _kind(want.dtype):  # an int tensor for a float weight: refused
            raise CheckpointError(
                f"{d}/params.safetensors: {k} is {got.dtype}, the model needs {want.dtype} "
                "(a float weight stored as integers is not a model this code wrote)"
            )
        var.set_value(jnp.asarray(got, dtype=want.dtype))
    model = nnx.merge(graphdef, nnx.from_flat_state(flat))
    tokenizer = None
    if (d / "tokenizer.json").exists():
        try:
            tokenizer = Tokenizer.load(d / "tokenizer.json")
        except Exception as e:  # the tokenizers library raises its own untyped errors
            raise CheckpointError(f"{d / 'tokenizer.json'}: cannot load tokenizer ({e})") from None
    return ModelBundle(
        model=model, tokenizer=tokenizer, config=cfg, extra=meta.get("extra", {}), path=d
    )


def _saveable_abstract(var: nnx.Variable) -> bool:
    value = var.get_value()
    dtype = getattr(value, "dtype", None)
    return dtype is not None and not jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
