"""A decoder LM that reads its prompt's text through a pretrained sentence encoder.

`EncoderConditionedLM` has the engine decoder's interface (`__call__`, `hidden`,
`logits`, `init_cache`, `forward_cached`, `hidden_cached`, `cfg.vocab_size`), so every
trainer, the KV-cache sampler, constrained decoding and model bundles take it as they
take a `Transformer`. Inside, token ids split in two ranges:

- ids `0 .. S-1` (`cfg.decoder.vocab_size`) are the decoder's own tokens (a task's
  special tokens: for the router `<bos>`, `<att:*>`, `<plan>`, the steps, `<eos>`); the
  decoder embeds them and its output head covers them alone, so logits are `[.., S]`;
- ids `S + i` are piece `i` of the encoder's vocabulary (USE multilingual's 128,000
  SentencePiece pieces). They are never predicted.

The text run of a prompt (the start token `cfg.text_start_id` and the pieces after it,
plus the first token after them, which stands in for the encoder's `</s>`) is read by
the encoder as one sentence. Each position of that run gets, added to its (pad-id)
decoder embedding, what `cfg.conditioning` names:

- `"pieces+sentence"` (the default): a projection of the encoder's per-piece features
  *and* of the sentence vector, so the decoder attends over pretrained features of every
  piece and sees the pretrained meaning of the whole request at each of them;
- `"sentence"`: the sentence vector's projection alone, the same at every position of the
  run (one vector, as semantic-router-style classifiers read a request);
- `"pieces"`: the per-piece features alone.

docs/router.md gives the three's measured effect. Positions outside the run get nothing
added, so the same token gets the same input in the full-sequence path and in a cached
decode step, and the two paths agree exactly.

Design choices:
- The encoder is a child module, so it is saved, loaded and (optionally) fine-tuned with
  the rest; its frozen piece table is not an `nnx.Param` (`models.encoders.use`).
  `conditioned_wrt` is the `wrt` filter of each way to train it: the decoder and
  projections only (`frozen_encoder_filter`: the encoder's features are pretrained and
  3.4 M parameters larger), every `nnx.Param` (the encoder's layers above its table too),
  or with `cfg.encoder_lora` the encoder's low-rank adapters in place of its weights.
- Only the USE encoder is wired (`encoder = "use-multilingual-v3"`); another encoder
  with `token_features` and `pool` plugs in the same way.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import jax
import jax.numpy as jnp
from flax import nnx
from pydantic import ConfigDict, Field

from studio_align.config import Strict
from studio_align.models.config import LoraConfig, ModelConfig
from studio_align.models.encoders.adapters import EncoderLora
from studio_align.models.encoders.use import (
    BRANCH_DIM,
    EMB_DIM,
    OUT_DIM,
    UniversalSentenceEncoder,
)
from studio_align.models.transformer import Cache, Transformer

USE_START, USE_END = 1, 2  # `<s>` and `</s>` in the USE piece vocabulary
# what each position of the text run adds to its decoder input (module docstring)
Conditioning = Literal["pieces+sentence", "sentence", "pieces"]
CONDITIONINGS: tuple[str, ...] = get_args(Conditioning)


class ConditionedConfig(Strict):
    """An encoder-conditioned decoder: the decoder's config plus how text ids map."""

    model_config = ConfigDict(extra="forbid", frozen=True)  # hashable: part of the graph

    decoder: ModelConfig  # vocab_size = the decoder's own tokens (ids 0..S-1)
    encoder: Literal["use-multilingual-v3"] = "use-multilingual-v3"
    pieces: int = Field(default=128_000, ge=1)  # encoder pieces, ids S..S+pieces-1
    text_start_id: int = Field(default=1, ge=0)  # the decoder token that opens the text
    conditioning: Conditioning = "pieces+sentence"
    # low-rank adapters on the encoder (None: none); what fine-tuning trains in its place
    encoder_lora: EncoderLora | None = None

    @property
    def vocab_size(self) -> int:
        """The ids the model predicts (its logits' width)."""
        return self.decoder.vocab_size

    @property
    def input_vocab_size(self) -> int:
        """The ids the model reads: its own tokens and the encoder's pieces."""
        return self.decoder.vocab_size + self.pieces

    @property
    def jnp_dtype(self) -> Any:
        return self.decoder.jnp_dtype

    @property
    def lora(self) -> LoraConfig | None:
        return self.decoder.lora


class EncoderConditionedLM(nnx.Module):
    """Decoder LM over special tokens whose text is read by a pretrained encoder."""

    sentence_dim = OUT_DIM  # the width of `sentence`

    def __init__(
        self,
        cfg: ConditionedConfig,
        *,
        rngs: nnx.Rngs,
        encoder: UniversalSentenceEncoder | None = None,
    ):
        self.cfg = cfg
        self.encoder = encoder if encoder is not None else UniversalSentenceEncoder.blank()
        d = cfg.decoder.d_model
        feat = EMB_DIM + 3 * BRANCH_DIM
        init = nnx.initializers.normal(0.02)
        pieces, sentence = cfg.conditioning != "sentence", cfg.conditioning != "pieces"
        self.piece_proj = nnx.Linear(feat, d, kernel_init=init, rngs=rngs) if pieces else None
        self.sentence_proj = (
            nnx.Linear(OUT_DIM, d, kernel_init=init, rngs=rngs) if sentence else None
        )
        self.decoder = Transformer(cfg.decoder, rngs=rngs)
        if cfg.encoder_lora is not None:  # last: the same seed gives the same decoder either way
            self.encoder.attach_lora(cfg.encoder_lora, rngs=rngs)

    # -- reading the text ------------------------------------------------------------------

    def _text_run(self, tokens: jax.Array, attn_mask: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(encoder piece ids, mask of the text run) of a chunk of tokens."""
        s = self.cfg.decoder.vocab_size
        mask = attn_mask.astype(jnp.bool_)
        piece = (tokens >= s) & mask
        start = (tokens == self.cfg.text_start_id) & mask
        inside = piece | start
        prev = jnp.pad(inside, ((0, 0), (1, 0)))[:, :-1]
        end = mask & ~inside & prev
        run = inside | end
        ids = jnp.where(start, USE_START, jnp.where(end, USE_END, jnp.where(piece, tokens - s, 0)))
        return ids, run

    def read(self, tokens: jax.Array, attn_mask: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(decoder token ids, added input embeddings [B, T, D]) of a chunk of tokens."""
        ids, run = self._text_run(tokens, attn_mask)
        feats = self.encoder.token_features(ids, run)
        x = jnp.zeros((*tokens.shape, self.cfg.decoder.d_model), feats.dtype)
        if self.piece_proj is not None:
            x = x + self.piece_proj(feats)
        if self.sentence_proj is not None:
            x = x + self.sentence_proj(self.encoder.pool(feats, run))[:, None, :]
        x = jnp.where(run[..., None], x, 0.0)
        s = self.cfg.decoder.vocab_size
        return jnp.where(tokens < s, tokens, 0), x

    def sentence(self, tokens: jax.Array, attn_mask: jax.Array) -> jax.Array:
        """The encoder's unit sentence vector `[B, 512]` of each row's text run: the
        pretrained embedding of the request (the package's own USE vector of its text)."""
        ids, run = self._text_run(tokens, attn_mask)
        return self.encoder.pool(self.encoder.token_features(ids, run), run)

    # -- the decoder's interface -------------------------------------------------------------

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
    ) -> jax.Array:
        if attn_mask is None:
            attn_mask = jnp.ones(tokens.shape, jnp.bool_)
        ids, x = self.read(tokens, attn_mask)
        return self.decoder.hidden(ids, positions, attn_mask, branches, embeds=x)

    def logits(self, h: jax.Array) -> jax.Array:
        return self.decoder.logits(h)

    def init_cache(self, batch: int, size: int, dtype: Any = None) -> Cache:
        return self.decoder.init_cache(batch, size, dtype)

    def forward_cached(
        self, tokens: jax.Array, positions: jax.Array, attn_mask: jax.Array, cache: Cache
    ) -> tuple[jax.Array, Cache]:
        h, cache = self.hidden_cached(tokens, positions, attn_mask, cache)
        return self.logits(h), cache

    def hidden_cached(
        self, tokens: jax.Array, positions: jax.Array, attn_mask: jax.Array, cache: Cache
    ) -> tuple[jax.Array, Cache]:
        ids, x = self.read(tokens, attn_mask)
        return self.decoder.hidden_cached(ids, positions, attn_mask, cache, embeds=x)


def frozen_encoder_filter() -> Any:
    """Train every `nnx.Param` outside the encoder (the decoder and the projections)."""
    return nnx.All(nnx.Param, nnx.Not(nnx.PathContains("encoder")))


def conditioned_wrt(cfg: ConditionedConfig, train_encoder: bool) -> Any:
    """The `wrt` filter: the decoder and projections, and with `train_encoder` the encoder's
    adapters (when `cfg.encoder_lora` attached them) or else its weights above the table."""
    if not train_encoder:
        return frozen_encoder_filter()
    if cfg.encoder_lora is not None:
        return nnx.Any(frozen_encoder_filter(), nnx.All(nnx.LoRAParam, nnx.PathContains("encoder")))
    return nnx.Param
