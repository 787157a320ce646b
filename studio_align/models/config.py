"""Model configuration: one frozen pydantic model for the decoder, one for LoRA.

The field names follow Hugging Face's `Gemma3TextConfig` where a field has a counterpart
there (`hidden_size` is `d_model` here, the rest match), so translating a checkpoint's
`config.json` is a rename, not a re-derivation. Both models are frozen (hashable): an NNX
module keeps its config as static graph data, and `nnx.jit` caches on it.

Presets:

- `tiny(vocab_size)`: for tests; runs in milliseconds, has one local and one global layer.
- `router(vocab_size)`: the default intent router, ~4M parameters, trains on 2 CPU cores
  in minutes.
- `gemma3_270m()`: Gemma 3 270M dimensions (and FunctionGemma 270M, same shapes).
"""

from __future__ import annotations

from typing import Literal

import jax.numpy as jnp
from pydantic import ConfigDict, Field, model_validator

from studio_align.config import Strict

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
DTypeName = Literal["float32", "bfloat16", "float16"]
LayerType = Literal["sliding_attention", "full_attention"]


class LoraConfig(Strict):
    """Low-rank adapters on named projections: y = x W + (alpha / rank) * x A B."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rank: int = Field(8, ge=1)
    alpha: float = Field(16.0, gt=0)
    targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")

    @model_validator(mode="after")
    def _known_targets(self) -> LoraConfig:
        unknown = sorted(set(self.targets) - set(LORA_TARGETS))
        if unknown:
            raise ValueError(f"unknown LoRA targets {unknown}; choose from {list(LORA_TARGETS)}")
        return self

    @property
    def scale(self) -> float:
        return self.alpha / self.rank


class ModelConfig(Strict):
    """Shape and numerics of a Gemma-3-style decoder.

    `layer_types` (one entry per layer) wins over `sliding_window_pattern`; with neither,
    every `sliding_window_pattern`-th layer is global and the rest local (Gemma 3: 5 local
    then 1 global). `sliding_window=None` makes every layer global.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    vocab_size: int = Field(ge=2)
    d_model: int = Field(ge=1)
    num_layers: int = Field(ge=1)
    num_heads: int = Field(ge=1)
    num_kv_heads: int = Field(ge=1)
    head_dim: int = Field(ge=2)
    d_ff: int = Field(ge=1)
    query_pre_attn_scalar: float | None = None  # None: head_dim (scores scaled by its -1/2 power)
    rope_theta: float = 1_000_000.0  # global layers
    rope_local_base_freq: float = 10_000.0  # sliding-window layers
    rope_scaling_factor: float = 1.0  # linear position scaling on global layers (Gemma 3 4B+: 8)
    sliding_window: int | None = None
    sliding_window_pattern: int = 6
    layer_types: tuple[LayerType, ...] | None = None
    attn_logit_softcapping: float | None = None
    final_logit_softcapping: float | None = None
    rms_norm_eps: float = 1e-6
    max_seq_len: int = 2048
    dtype: DTypeName = "float32"  # activations / matmul inputs
    param_dtype: DTypeName = "float32"
    lora: LoraConfig | None = None

    @model_validator(mode="after")
    def _check(self) -> ModelConfig:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim ({self.head_dim}) must be even for rotary embeddings")
        if self.layer_types is not None and len(self.layer_types) != self.num_layers:
            raise ValueError(
                f"layer_types has {len(self.layer_types)} entries, num_layers is {self.num_layers}"
            )
        return self

    # -- derived ---------------------------------------------------------------------------

    def is_local(self, layer: int) -> bool:
        """Whether layer `layer` uses sliding-window attention (and the local RoPE base)."""
        if self.sliding_window is None:
            return False
        if self.layer_types is not None:
            return self.layer_types[layer] == "sliding_attention"
        return (layer + 1) % self.sliding_window_pattern != 0

    @property
    def jnp_dtype(self) -> jnp.dtype:
        return jnp.dtype(self.dtype)

    @property
    def jnp_param_dtype(self) -> jnp.dtype:
        return jnp.dtype(self.param_dtype)

    @property
    def attn_scale(self) -> float:
        return float(self.query_pre_attn_scalar or self.head_dim) ** -0.5

    def num_params(self, *, include_embedding: bool = True) -> int:
        """Parameter count of the base model (LoRA adapters excluded)."""
        d, h, kv, hd, f = self.d_model, self.num_heads, self.num_kv_heads, self.head_dim, self.d_ff
        attn = d * h * hd * 2 + d * kv * hd * 2 + 2 * hd
        per_layer = attn + 3 * d * f + 4 * d
        n = self.num_layers * per_layer + d
        return n + (self.vocab_size * d if include_embedding else 0)

    # -- presets ---------------------------------------------------------------------------

    @classmethod
    def tiny(cls, vocab_size: int = 128, **overrides: object) -> ModelConfig:
        """Two layers (one local, window 8; one global): fast enough for any unit test."""
        base: dict[str, object] = dict(
            vocab_size=vocab_size, d_model=32, num_layers=2, num_heads=4, num_kv_heads=2,
            head_dim=8, d_ff=64, sliding_window=8, sliding_window_pattern=2, max_seq_len=256,
        )  # fmt: skip
        return cls(**{**base, **overrides})

    @classmethod
    def router(cls, vocab_size: int = 4096, **overrides: object) -> ModelConfig:
        """The default intent router: d_model 256, 4 layers, GQA 4/1, ~4M parameters."""
        base: dict[str, object] = dict(
            vocab_size=vocab_size, d_model=256, num_layers=4, num_heads=4, num_kv_heads=1,
            head_dim=64, d_ff=1024, sliding_window=128, sliding_window_pattern=4,
            max_seq_len=512,
        )  # fmt: skip
        return cls(**{**base, **overrides})

    @classmethod
    def gemma3_270m(cls, vocab_size: int = 262_144, **overrides: object) -> ModelConfig:
        """Gemma 3 270M (and FunctionGemma 270M) dimensions."""
        base: dict[str, object] = dict(
            vocab_size=vocab_size, d_model=640, num_layers=18, num_heads=4, num_kv_heads=1,
            head_dim=256, d_ff=2048, query_pre_attn_scalar=256, sliding_window=512,
            sliding_window_pattern=6, rope_theta=1_000_000.0, rope_local_base_freq=10_000.0,
            max_seq_len=32_768,
        )  # fmt: skip
        return cls(**{**base, **overrides})
