"""Log-probabilities of given tokens under a causal LM, the quantity every loss needs.

Conventions (shared by SFT, DPO-family, KTO and GRPO):

- `tokens [B, T]` is a batch of prompt+completion sequences, normally right-padded.
- `mask [B, T]` (bool/0-1) marks real tokens. It is the attention mask; positions are
  derived from it, so left-padded batches work too. With right padding the default
  (`None` = all real) gives the same values on real tokens, because causal attention
  never looks right.
- `token_logps` returns `[B, T-1]`: entry t is log p(tokens[:, t+1] | tokens[:, :t+1]),
  zero where `tokens[:, t+1]` is padding.
- `sequence_logps` sums those over the tokens that `loss_mask [B, T]` marks (the
  completion); `loss_mask[:, 0]` is ignored because the first token has no prediction.

Log-softmax is taken as `logit - logsumexp(logits)`, which never materialises a second
`[B, T, V]` array.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from studio_align.models.transformer import Transformer, positions_from_mask


def gather_logps(logits: jax.Array, targets: jax.Array) -> jax.Array:
    """log softmax(logits)[..., targets] in float32; logits [..., V], targets [...]."""
    logits = logits.astype(jnp.float32)
    picked = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    return picked - jax.nn.logsumexp(logits, axis=-1)


def token_logps(model: Transformer, tokens: jax.Array, mask: jax.Array | None = None) -> jax.Array:
    """[B, T-1] log-probs of `tokens[:, 1:]`, zeroed where those tokens are padding."""
    if mask is None:
        mask = jnp.ones(tokens.shape, jnp.bool_)
    mask = mask.astype(jnp.bool_)
    logits = model(tokens, positions_from_mask(mask), mask)
    lp = gather_logps(logits[:, :-1], tokens[:, 1:])
    return jnp.where(mask[:, 1:], lp, 0.0)


def sequence_logps(
    model: Transformer,
    tokens: jax.Array,
    loss_mask: jax.Array,
    attn_mask: jax.Array | None = None,
) -> jax.Array:
    """[B] sum of log p over the tokens `loss_mask` marks (the completion)."""
    lp = token_logps(model, tokens, attn_mask)
    return jnp.sum(lp * loss_mask[:, 1:].astype(lp.dtype), axis=-1)
