"""Projections with optional low-rank adapters, and the adapter life cycle.

`Linear` is a bias-free projection whose `kernel` is laid out `[in, out]` (the transpose
of a PyTorch/Hugging Face `weight`). With a `LoraConfig` it also holds `lora_a [in, r]`
and `lora_b [r, out]` as `nnx.LoRAParam`, so an optimiser built over
`nnx.LoRAParam` trains the adapters alone, and computes

    y = x @ kernel + (alpha / r) * (x @ lora_a) @ lora_b

`lora_b` starts at zero, so adding adapters leaves the model's function unchanged.
Adapters are added to an existing model (`add_lora`, e.g. after loading a base
checkpoint), saved and loaded alone as safetensors keyed by module path (`save_adapters`,
`load_adapters`), and folded into the base kernels (`merge_lora`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.errors import CheckpointError
from studio_align.models.config import LoraConfig

_kernel_init = nnx.initializers.lecun_normal()
_lora_a_init = nnx.initializers.he_uniform()


class Linear(nnx.Module):
    """`y = x @ kernel` (+ the LoRA term when adapters are attached)."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        *,
        dtype: jnp.dtype = jnp.float32,
        param_dtype: jnp.dtype = jnp.float32,
        sharding: tuple[str | None, str | None] = (None, None),
        lora: LoraConfig | None = None,
        rngs: nnx.Rngs,
    ):
        self.in_features = in_features
        self.out_features = out_features
        self.dtype = dtype
        self.param_dtype = param_dtype
        self.sharding = sharding
        self.kernel = nnx.Param(
            _kernel_init(rngs.params(), (in_features, out_features), param_dtype),
            out_sharding=sharding,
            eager_sharding=False,
        )
        self.lora_scale: float = 0.0
        self.lora_a: nnx.LoRAParam | None = nnx.data(None)
        self.lora_b: nnx.LoRAParam | None = nnx.data(None)
        if lora is not None:
            self.attach_lora(lora, rngs=rngs)

    def attach_lora(self, lora: LoraConfig, *, rngs: nnx.Rngs) -> None:
        """Give this projection fresh adapters (A random, B zero)."""
        a = _lora_a_init(rngs.params(), (self.in_features, lora.rank), self.param_dtype)
        b = jnp.zeros((lora.rank, self.out_features), self.param_dtype)
        self.lora_a = nnx.LoRAParam(a, out_sharding=(self.sharding[0], None), eager_sharding=False)
        self.lora_b = nnx.LoRAParam(b, out_sharding=(None, self.sharding[1]), eager_sharding=False)
        self.lora_scale = float(lora.scale)

    def __call__(self, x: jax.Array) -> jax.Array:
        # Flatten leading dims: a 2-D matmul keeps the backward pass's weight gradient a
        # plain GEMM (XLA:CPU runs dots contracting over two batch dims far slower).
        lead = x.shape[:-1]
        x = x.reshape(-1, self.in_features).astype(self.dtype)
        y = x @ self.kernel[...].astype(self.dtype)
        if self.lora_a is not None and self.lora_b is not None:
            a = self.lora_a[...].astype(self.dtype)
            b = self.lora_b[...].astype(self.dtype)
            y = y + ((x @ a) @ b) * jnp.asarray(self.lora_scale, self.dtype)
        return y.reshape(*lead, self.out_features)


def iter_linears(model: nnx.Module) -> Iterator[tuple[str, Linear]]:
    """Every `Linear` in `model` with its dotted path (e.g. `layers.0.self_attn.q_proj`)."""
    for path, node in nnx.iter_graph(model):
        if isinstance(node, Linear):
            yield ".".join(str(p) for p in path), node


def add_lora(model: nnx.Module, lora: LoraConfig, *, rngs: nnx.Rngs) -> nnx.Module:
    """Attach adapters to every projection named in `lora.targets`, in place; returns model."""
    found = False
    for path, lin in iter_linears(model):
        if path.rsplit(".", 1)[-1] in lora.targets:
            lin.attach_lora(lora, rngs=rngs)
            found = True
    if not found:
        raise ValueError(f"no projection named any of {list(lora.targets)} in the model")
    cfg = getattr(model, "cfg", None)
    if cfg is not None:
        setattr(model, "cfg", cfg.model_copy(update={"lora": lora}))  # noqa: B010
    return model


def lora_state(model: nnx.Module) -> nnx.State:
    """The adapters alone (what a LoRA optimiser updates and what `save_adapters` writes)."""
    return nnx.state(model, nnx.LoRAParam)


def _flat_adapters(model: nnx.Module) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for path, lin in iter_linears(model):
        if lin.lora_a is not None and lin.lora_b is not None:
            out[f"{path}.lora_a"] = np.asarray(jax.device_get(lin.lora_a[...]), np.float32)
            out[f"{path}.lora_b"] = np.asarray(jax.device_get(lin.lora_b[...]), np.float32)
    return out


def save_adapters(model: nnx.Module, path: str | Path) -> Path:
    """Write the adapters alone to `path` (safetensors, float32) with the LoRA config."""
    from safetensors.numpy import save_file

    tensors = _flat_adapters(model)
    if not tensors:
        raise CheckpointError(f"{path}: the model has no LoRA adapters to save")
    cfg = getattr(model, "cfg", None)
    meta = {"format": "studio_align.lora/1"}
    if cfg is not None and cfg.lora is not None:
        meta["lora"] = json.dumps(cfg.lora.model_dump(mode="json"))
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(p), metadata=meta)
    return p


def load_adapters(model: nnx.Module, path: str | Path, *, rngs: nnx.Rngs | None = None) -> None:
    """Load adapters saved by `save_adapters` into `model` (attaching them if absent)."""
    from safetensors import safe_open
    from safetensors.numpy import load_file

    p = Path(path)
    if not p.exists():
        raise CheckpointError(f"{p}: adapter file not found")
    with safe_open(str(p), framework="numpy") as f:
        meta: dict[str, Any] = f.metadata() or {}
    tensors = load_file(str(p))
    if "lora" in meta:
        lora = LoraConfig.model_validate(json.loads(meta["lora"]))
        cfg = getattr(model, "cfg", None)
        if cfg is not None and cfg.lora != lora:
            add_lora(model, lora, rngs=rngs or nnx.Rngs(0))
    linears = dict(iter_linears(model))
    used = set()
    for name, lin in linears.items():
        ka, kb = f"{name}.lora_a", f"{name}.lora_b"
        if ka not in tensors:
            continue
        if lin.lora_a is None or lin.lora_b is None:
            raise CheckpointError(f"{p}: {name} has no adapter slot in the model")
        for var, key in ((lin.lora_a, ka), (lin.lora_b, kb)):
            if tuple(tensors[key].shape) != tuple(var.shape):
                raise CheckpointError(
                    f"{p}: {key} has shape {tensors[key].shape}, model expects {var.shape}"
                )
            var[...] = jnp.asarray(tensors[key], var.dtype)
            used.add(key)
    extra = sorted(set(tensors) - used)
    if extra:
        raise CheckpointError(f"{p}: adapters for modules the model does not have: {extra[:5]}")


def merge_lora(model: nnx.Module) -> nnx.Module:
    """A copy of `model` with every adapter folded into its kernel and removed."""
    merged = nnx.clone(model)
    for _, lin in iter_linears(merged):
        if lin.lora_a is None or lin.lora_b is None:
            continue
        a = lin.lora_a[...].astype(jnp.float32)
        b = lin.lora_b[...].astype(jnp.float32)
        k = lin.kernel[...].astype(jnp.float32) + lin.lora_scale * (a @ b)
        lin.kernel[...] = k.astype(lin.kernel.dtype)
        lin.lora_a = None
        lin.lora_b = None
        lin.lora_scale = 0.0
    cfg = getattr(merged, "cfg", None)
    if cfg is not None:
        setattr(merged, "cfg", cfg.model_copy(update={"lora": None}))  # noqa: B010
    return merged
