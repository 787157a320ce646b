"""A Hugging Face Gemma 3 checkpoint from a local directory as a `TextEncoder`.

The sentence vector is the mean of the final-norm hidden states over the text's tokens,
L2-normalised: the plain recipe for a decoder used as an encoder, with no head to train
before it is useful. The checkpoint is read by `models.hf.load_hf` (nothing is fetched
from a hub) and tokenized by its own `tokenizer.json`; every way the directory can be
broken is the `ModelLoadError` that `load_hf` raises, naming the file or tensor.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
from flax import nnx

from studio_align.errors import ModelLoadError
from studio_align.models.encoders.protocol import Tokens, pad_ids
from studio_align.models.hf import load_hf
from studio_align.models.tokenizer import Tokenizer
from studio_align.models.transformer import Transformer

MAX_TOKENS = 256


@functools.lru_cache(maxsize=4)
def _tokenizer(directory: str) -> Tokenizer:
    return Tokenizer.load(directory)


class HFTextEncoder(nnx.Module):
    """Mean-pooled Gemma 3 hidden states: `encoder(ids, mask) -> [B, d_model]` unit vectors."""

    def __init__(self, model: Transformer, *, tokenizer_dir: str):
        self.model = model
        self.tokenizer_dir = tokenizer_dir

    @property
    def dim(self) -> int:
        return int(self.model.cfg.d_model)

    def tokenize(self, texts: Sequence[str], *, length: int | None = None) -> Tokens:
        tok = _tokenizer(self.tokenizer_dir)
        rows = [tok.encode(t, add_bos=tok.bos_id is not None, allow_special=False) for t in texts]
        cap = MAX_TOKENS if length is None else length
        return pad_ids([r[:cap] for r in rows], length, pad_id=tok.pad_id or 0)

    def __call__(self, ids: jax.Array, mask: jax.Array) -> jax.Array:
        h = self.model.hidden(ids, attn_mask=mask)
        m = mask.astype(jnp.float32)[..., None]
        mean = (h.astype(jnp.float32) * m).sum(1) / jnp.maximum(m.sum(1), 1.0)
        return mean / jnp.maximum(jnp.linalg.norm(mean, axis=-1, keepdims=True), 1e-6)


def load_hf_encoder(directory: str | Path, *, dtype: str = "float32") -> HFTextEncoder:
    """The encoder of a local Gemma 3 directory (`config.json`, safetensors, tokenizer)."""
    d = Path(directory)
    if not (d / "tokenizer.json").is_file():
        raise ModelLoadError(f"{d / 'tokenizer.json'}: not found (a text encoder needs it)")
    hf = load_hf(d, dtype=dtype, tokenizer=True)
    return HFTextEncoder(hf.model, tokenizer_dir=str(d))
