"""Gemma-3-style decoder-only transformer in flax NNX, with a static KV cache.

Design choices:

- Module tree and parameter names mirror Hugging Face's `Gemma3ForCausalLM`
  (`embed_tokens`, `layers.{i}.self_attn.{q,k,v,o}_proj`, `q_norm`, `k_norm`,
  `input_layernorm`, `post_attention_layernorm`, `pre_feedforward_layernorm`,
  `post_feedforward_layernorm`, `mlp.{gate,up,down}_proj`, `norm`), so a checkpoint maps
  one-to-one: HF `X.weight` of a projection is our `X.kernel` transposed, HF norm
  `weight` is our `scale` (both used as `1 + scale`), the embedding is shared with the
  output head. See docs/engine.md for the table.
- Attention masks are built once per call from three facts: which keys are real
  (`attn_mask` / filled cache slots), causality by slot order, and each token's position
  (sliding window: `q_pos - k_pos < window`, as in HF). So right padding, left padding and
  per-sample prompt lengths all work, with or without the cache.
- The cache is a plain pytree (`Cache`) of per-layer keys `[B, K, Dh, S]` and values
  `[B, K, S, Dh]` plus the position held in every slot (-1 = empty) and the next write
  slot (`cursor`). It is
  preallocated to a static size, updated with `dynamic_update_slice`, and returned, so a
  jitted decode loop can donate it. Local layers keep the full-size cache and rely on
  the window mask: simpler than ring buffers and exact.
- Numerics follow Gemma: RMSNorm, softmax and RoPE in float32, matmuls in `cfg.dtype`,
  logits returned in float32.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from studio_align.models.config import ModelConfig
from studio_align.models.lora import Linear

_NEG = -0.7 * float(jnp.finfo(jnp.float32).max)


class Cache(NamedTuple):
    """Static-size KV cache. `pos[b, s]` is the position stored in slot s (-1 = empty)."""

    k: tuple[jax.Array, ...]  # per layer [B, num_kv_heads, head_dim, S] (keys transposed)
    v: tuple[jax.Array, ...]  # per layer [B, num_kv_heads, S, head_dim]
    pos: jax.Array  # [B, S] int32
    cursor: jax.Array  # [] int32: next slot to write

    @property
    def size(self) -> int:
        return int(self.pos.shape[1])


class RMSNorm(nnx.Module):
    """`x / rms(x) * (1 + scale)`, computed in float32 (scale starts at zero)."""

    def __init__(self, dim: int, *, eps: float = 1e-6, param_dtype: jnp.dtype = jnp.float32):
        self.eps = eps
        self.scale = nnx.Param(
            jnp.zeros((dim,), param_dtype), out_sharding=(None,), eager_sharding=False
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        x32 = x.astype(jnp.float32)
        y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
        return (y * (1.0 + self.scale[...].astype(jnp.float32))).astype(x.dtype)


class Embedder(nnx.Module):
    """Token embedding shared with the output head; inputs are scaled by sqrt(d_model)."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        init = nnx.initializers.normal(stddev=cfg.d_model**-0.5)
        self.embedding = nnx.Param(
            init(rngs.params(), (cfg.vocab_size, cfg.d_model), cfg.jnp_param_dtype),
            out_sharding=("vocab", "embed"),
            eager_sharding=False,
        )
        self.dtype = cfg.jnp_dtype
        self.scale = math.sqrt(cfg.d_model)

    def encode(self, tokens: jax.Array) -> jax.Array:
        x = jnp.take(self.embedding[...], tokens, axis=0).astype(self.dtype)
        return x * jnp.asarray(self.scale, self.dtype)

    def decode(self, x: jax.Array) -> jax.Array:
        emb = self.embedding[...].astype(self.dtype)
        x2 = x.reshape(-1, x.shape[-1])  # 2-D GEMM: fast forward and backward on XLA:CPU
        out = jax.lax.dot_general(
            x2, emb, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32
        )
        return out.reshape(*x.shape[:-1], emb.shape[0])


def rope_tables(positions: jax.Array, head_dim: int, base: float, scale: float = 1.0):
    """`(sin, cos)` of shape [B, T, 1, head_dim/2] for rotate-half RoPE (float32)."""
    half = head_dim // 2
    inv_freq = 1.0 / (base ** (jnp.arange(0, half, dtype=jnp.float32) * 2.0 / head_dim))
    angles = (positions.astype(jnp.float32) / scale)[..., None] * inv_freq
    return jnp.sin(angles)[:, :, None, :], jnp.cos(angles)[:, :, None, :]


def apply_rope(x: jax.Array, sin: jax.Array, cos: jax.Array) -> jax.Array:
    """Rotate-half RoPE (HF/Gemma convention: first and second halves pair up)."""
    x32 = x.astype(jnp.float32)
    x1, x2 = jnp.split(x32, 2, axis=-1)
    out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
    return out.astype(x.dtype)


class Attention(nnx.Module):
    """GQA self-attention with QK-norm, RoPE and optional logit soft-capping."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        d, h, kv, hd = cfg.d_model, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        kw: dict[str, Any] = dict(dtype=cfg.jnp_dtype, param_dtype=cfg.jnp_param_dtype, rngs=rngs)

        def lora_for(name: str):
            return cfg.lora if cfg.lora is not None and name in cfg.lora.targets else None

        self.q_proj = Linear(d, h * hd, sharding=("embed", "heads"), lora=lora_for("q_proj"), **kw)
        self.k_proj = Linear(d, kv * hd, sharding=("embed", "kv"), lora=lora_for("k_proj"), **kw)
        self.v_proj = Linear(d, kv * hd, sharding=("embed", "kv"), lora=lora_for("v_proj"), **kw)
        self.o_proj = Linear(h * hd, d, sharding=("heads", "embed"), lora=lora_for("o_proj"), **kw)
        self.q_norm = RMSNorm(hd, eps=cfg.rms_norm_eps, param_dtype=cfg.jnp_param_dtype)
        self.k_norm = RMSNorm(hd, eps=cfg.rms_norm_eps, param_dtype=cfg.jnp_param_dtype)
        self.num_heads, self.num_kv_heads, self.head_dim = h, kv, hd
        self.scale = cfg.attn_scale
        self.softcap = cfg.attn_logit_softcapping

    def __call__(
        self,
        x: jax.Array,
        rope: tuple[jax.Array, jax.Array],
        mask: jax.Array,
        kv_cache: tuple[jax.Array, jax.Array] | None = None,
        index: jax.Array | None = None,
    ) -> tuple[jax.Array, tuple[jax.Array, jax.Array] | None]:
        b, t, _ = x.shape
        h, kvh, hd = self.num_heads, self.num_kv_heads, self.head_dim
        q = self.q_norm(self.q_proj(x).reshape(b, t, h, hd))
        k = self.k_norm(self.k_proj(x).reshape(b, t, kvh, hd))
        v = self.v_proj(x).reshape(b, t, kvh, hd)
        q = apply_rope(q, *rope)
        k = apply_rope(k, *rope)
        # Batched matmuls [B, K, G*T, D] x [B, K, D, S] and [B, K, G*T, S] x [B, K, S, D]:
        # batch dims lead and no operand is transposed, the layouts XLA:CPU runs as fast
        # GEMMs (a transposed right operand is ~10x slower there). The cache keeps keys as
        # [B, K, D, S] and values as [B, K, S, D], so decoding never transposes it.
        k = k.transpose(0, 2, 3, 1)
        v = v.transpose(0, 2, 1, 3)
        new_cache = None
        if kv_cache is not None:
            assert index is not None, "a cached call needs the write index"
            ck, cv = kv_cache
            zero = jnp.zeros((), jnp.int32)
            ck = jax.lax.dynamic_update_slice(ck, k.astype(ck.dtype), (zero, zero, zero, index))
            cv = jax.lax.dynamic_update_slice(cv, v.astype(cv.dtype), (zero, zero, index, zero))
            k, v, new_cache = ck.astype(q.dtype), cv.astype(q.dtype), (ck, cv)
        g, s = h // kvh, k.shape[3]
        q = q.reshape(b, t, kvh, g, hd).transpose(0, 2, 3, 1, 4).reshape(b, kvh, g * t, hd)
        if t == 1:
            # One query per row (decoding): broadcast-multiply-reduce. Inside the decode
            # loop this reads the cache in place; a dot would make XLA:CPU copy it per step.
            logits = jnp.sum(q[..., None] * k[:, :, None], axis=3, dtype=jnp.float32)
        else:
            logits = jnp.einsum("bkqd,bkds->bkqs", q, k, preferred_element_type=jnp.float32)
        logits = logits.reshape(b, kvh, g, t, s) * self.scale
        if self.softcap is not None:
            logits = jnp.tanh(logits / self.softcap) * self.softcap
        logits = jnp.where(mask[:, None, None, :, :], logits, _NEG)
        probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype).reshape(b, kvh, g * t, s)
        if t == 1:
            out = jnp.sum(probs[..., None] * v[:, :, None], axis=3)
        else:
            out = jnp.einsum("bkqs,bksd->bkqd", probs, v)
        out = out.reshape(b, kvh, g, t, hd).transpose(0, 3, 1, 2, 4).reshape(b, t, h * hd)
        return self.o_proj(out), new_cache


class MLP(nnx.Module):
    """Gated GELU (tanh approximation): down(gelu(gate(x)) * up(x))."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        d, f = cfg.d_model, cfg.d_ff
        kw: dict[str, Any] = dict(dtype=cfg.jnp_dtype, param_dtype=cfg.jnp_param_dtype, rngs=rngs)

        def lora_for(name: str):
            return cfg.lora if cfg.lora is not None and name in cfg.lora.targets else None

        self.gate_proj = Linear(d, f, sharding=("embed", "mlp"), lora=lora_for("gate_proj"), **kw)
        self.up_proj = Linear(d, f, sharding=("embed", "mlp"), lora=lora_for("up_proj"), **kw)
        self.down_proj = Linear(f, d, sharding=("mlp", "embed"), lora=lora_for("down_proj"), **kw)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.down_proj(jax.nn.gelu(self.gate_proj(x), approximate=True) * self.up_proj(x))


class DecoderLayer(nnx.Module):
    """Pre- and post-norm around both attention and MLP (Gemma 3 "sandwich" norms)."""

    def __init__(self, cfg: ModelConfig, layer: int, *, rngs: nnx.Rngs):
        norm: dict[str, Any] = dict(eps=cfg.rms_norm_eps, param_dtype=cfg.jnp_param_dtype)
        self.is_local = cfg.is_local(layer)
        self.input_layernorm = RMSNorm(cfg.d_model, **norm)
        self.self_attn = Attention(cfg, rngs=rngs)
        self.post_attention_layernorm = RMSNorm(cfg.d_model, **norm)
        self.pre_feedforward_layernorm = RMSNorm(cfg.d_model, **norm)
        self.mlp = MLP(cfg, rngs=rngs)
        self.post_feedforward_layernorm = RMSNorm(cfg.d_model, **norm)

    def __call__(self, x, rope, mask, kv_cache=None, index=None):
        h, kv_cache = self.self_attn(self.input_layernorm(x), rope, mask, kv_cache, index)
        x = x + self.post_attention_layernorm(h)
        x = x + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))
        return x, kv_cache


def positions_from_mask(attn_mask: jax.Array) -> jax.Array:
    """Position of each token counting only real tokens (pads get a harmless clamp)."""
    return jnp.maximum(jnp.cumsum(attn_mask.astype(jnp.int32), axis=-1) - 1, 0)


class Transformer(nnx.Module):
    """Decoder LM: `model(tokens, positions, attn_mask) -> logits [B, T, V]` (float32)."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.embed_tokens = Embedder(cfg, rngs=rngs)
        self.layers = nnx.List([DecoderLayer(cfg, i, rngs=rngs) for i in range(cfg.num_layers)])
        self.norm = RMSNorm(cfg.d_model, eps=cfg.rms_norm_eps, param_dtype=cfg.jnp_param_dtype)

    # -- full-sequence path ------------------------------------------------------------------

    def __call__(
        self,
        tokens: jax.Array,
        positions: jax.Array | None = None,
        attn_mask: jax.Array | None = None,
    ) -> jax.Array:
        return self.logits(self.hidden(tokens, positions, attn_mask))

    def hidden(
        self,
        tokens: jax.Array,
        positions: jax.Array | None = None,
        attn_mask: jax.Array | None = None,
        branches: jax.Array | None = None,
        embeds: jax.Array | None = None,
    ) -> jax.Array:
        """Final-norm hidden states [B, T, D] (for chunked log-probs and value/reward heads).

        `embeds [B, T, D]` is added to the token embeddings: how a model that wraps this
        decoder feeds it what an encoder read (`models.conditioned`).

        `branches [B, T]` (int) lays several continuations of one shared prefix side by
        side in a row: a token of branch k > 0 attends to the shared trunk (branch 0) and
        to its own branch only, so `[prompt, chosen, rejected]` scores both completions
        while the prompt is computed once (pass each branch's own `positions`).
        """
        b, t = tokens.shape
        if attn_mask is None:
            attn_mask = jnp.ones((b, t), jnp.bool_)
        attn_mask = attn_mask.astype(jnp.bool_)
        if positions is None:
            positions = positions_from_mask(attn_mask)
        idx = jnp.arange(t)
        causal = (idx[None, :] <= idx[:, None])[None]  # [1, T, T]
        allowed = causal & attn_mask[:, None, :]
        if branches is not None:
            key = branches[:, None, :]
            allowed = allowed & ((key == 0) | (key == branches[:, :, None]))
        masks = self._masks(allowed, positions, positions)
        x = self.embed_tokens.encode(tokens)
        if embeds is not None:
            x = x + embeds.astype(x.dtype)
        ropes = self._ropes(positions)
        for layer in self.layers:
            x, _ = layer(x, ropes[layer.is_local], masks[layer.is_local])
        return self.norm(x)

    def logits(self, h: jax.Array) -> jax.Array:
        out = self.embed_tokens.decode(h)
        cap = self.cfg.final_logit_softcapping
        return out if cap is None else jnp.tanh(out / cap) * cap

    # -- cached path -------------------------------------------------------------------------

    def init_cache(self, batch: int, size: int, dtype: jnp.dtype | None = None) -> Cache:
        """An empty cache of `size` slots per sequence (prompt bucket + new tokens)."""
        c = self.cfg
        k_shape = (batch, c.num_kv_heads, c.head_dim, size)
        v_shape = (batch, c.num_kv_heads, size, c.head_dim)
        dt = dtype or c.jnp_dtype
        return Cache(
            k=tuple(jnp.zeros(k_shape, dt) for _ in range(c.num_layers)),
            v=tuple(jnp.zeros(v_shape, dt) for _ in range(c.num_layers)),
            pos=jnp.full((batch, size), -1, jnp.int32),
            cursor=jnp.zeros((), jnp.int32),
        )

    def forward_cached(
        self,
        tokens: jax.Array,
        positions: jax.Array,
        attn_mask: jax.Array,
        cache: Cache,
    ) -> tuple[jax.Array, Cache]:
        """Append `tokens [B, T]` at slots `cache.cursor...` and attend over the whole cache.

        Used for prefill (T = prompt bucket) and for decoding (T = 1). Tokens with
        `attn_mask` False are written but marked empty, so nothing ever attends to them.
        Returns logits [B, T, V] and the updated cache (cursor advanced by T).
        """
        h, cache = self.hidden_cached(tokens, positions, attn_mask, cache)
        return self.logits(h), cache

    def hidden_cached(
        self,
        tokens: jax.Array,
        positions: jax.Array,
        attn_mask: jax.Array,
        cache: Cache,
        embeds: jax.Array | None = None,
    ) -> tuple[jax.Array, Cache]:
        """`forward_cached` stopping at the final-norm hidden states [B, T, D] (a caller that
        needs the states too, e.g. the router's request embedding, applies `logits` itself).
        `embeds` as in `hidden`."""
        t = tokens.shape[1]
        attn_mask = attn_mask.astype(jnp.bool_)
        new_pos = jnp.where(attn_mask, positions, -1).astype(jnp.int32)
        slot_pos = jax.lax.dynamic_update_slice(cache.pos, new_pos, (jnp.int32(0), cache.cursor))
        # causal by position, not slot: a row's slots may be reused as a ring (continuous
        # batching admits a new request into a finished row's slots), and within one
        # request positions grow with the order its tokens were written
        kpos = slot_pos[:, None, :]
        allowed = (kpos >= 0) & (kpos <= positions[:, :, None].astype(jnp.int32))
        masks = self._masks(allowed, positions, slot_pos)
        x = self.embed_tokens.encode(tokens)
        if embeds is not None:
            x = x + embeds.astype(x.dtype)
        ropes = self._ropes(positions)
        ks, vs = [], []
        for i, layer in enumerate(self.layers):
            x, (k, v) = layer(
                x,
                ropes[layer.is_local],
                masks[layer.is_local],
                (cache.k[i], cache.v[i]),
                cache.cursor,
            )
            ks.append(k)
            vs.append(v)
        return self.norm(x), Cache(tuple(ks), tuple(vs), slot_pos, cache.cursor + t)

    # -- helpers -----------------------------------------------------------------------------

    def _masks(self, allowed: jax.Array, q_pos: jax.Array, k_pos: jax.Array):
        """(global mask, local mask), indexable by `layer.is_local`."""
        w = self.cfg.sliding_window
        if w is None:
            return allowed, allowed
        window = (q_pos[:, :, None] - k_pos[:, None, :]) < w
        return allowed, allowed & window

    def _ropes(self, positions: jax.Array):
        """(global rope tables, local rope tables), indexable by `layer.is_local`."""
        c = self.cfg
        glob = rope_tables(positions, c.head_dim, c.rope_theta, c.rope_scaling_factor)
        if c.sliding_window is None:
            return glob, glob
        return glob, rope_tables(positions, c.head_dim, c.rope_local_base_freq)
