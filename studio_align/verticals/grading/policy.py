"""The grading policy: source-image features + style request -> Gaussian over parameters.

A small flax NNX MLP. Inputs are the source's colour-statistics features (standardised
with statistics stored in the module, fitted on the behaviour-cloning sources) and a
request embedding; outputs are the mean of a diagonal Gaussian over the normalised
grading parameters (`renderer.PARAM_NAMES`) and a state-independent log-std.

The GRPO core treats the P parameters of one grade as the P "tokens" of a completion:
`log_probs` returns per-dimension log-densities [B, P], which is exactly the `[B, T]`
shape `algorithms.grpo.grpo_loss` takes (mask all ones), so the router and the grader
share one loss. `sample` lays groups out contiguously, as `grpo_advantages` expects.

Request embeddings default to a hashed bag of words (`request_features`): fixed,
dependency-free and good enough to condition on style words; a CLIP text embedding can
be passed instead (any [B, E] array with the configured `request_dim`).
"""

from __future__ import annotations

import hashlib
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.reward_models.color_stats import FEATURE_DIM
from studio_align.verticals.grading.renderer import N_PARAMS

REQUEST_DIM = 16
LOG_STD_MIN, LOG_STD_MAX = -4.0, 1.0


def request_features(texts: list[str], dim: int = REQUEST_DIM) -> np.ndarray:
    """Hashed bag-of-words embeddings [N, dim], L2-normalised (zeros for empty text)."""
    out = np.zeros((len(texts), dim), np.float32)
    for i, t in enumerate(texts):
        for w in re.findall(r"\w+", t.lower()):
            h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "little")
            out[i, h % dim] += 1.0 if (h >> 16) & 1 else -1.0
        n = np.linalg.norm(out[i])
        if n > 0:
            out[i] /= n
    return out


class Stat(nnx.Variable):
    """Non-trainable input statistics."""


class GradingPolicy(nnx.Module):
    def __init__(
        self,
        feat_dim: int = FEATURE_DIM,
        request_dim: int = REQUEST_DIM,
        *,
        hidden: int = 64,
        init_log_std: float = -1.0,
        rngs: nnx.Rngs,
    ) -> None:
        self.feat_dim, self.request_dim, self.hidden = feat_dim, request_dim, hidden
        self.f_mean = Stat(jnp.zeros((feat_dim,), jnp.float32))
        self.f_std = Stat(jnp.ones((feat_dim,), jnp.float32))
        self.l1 = nnx.Linear(feat_dim + request_dim, hidden, rngs=rngs)
        self.l2 = nnx.Linear(hidden, hidden, rngs=rngs)
        self.out = nnx.Linear(hidden, N_PARAMS, rngs=rngs)
        self.log_std = nnx.Param(jnp.full((N_PARAMS,), init_log_std, jnp.float32))

    def set_input_stats(self, feats: np.ndarray) -> None:
        self.f_mean.value = jnp.asarray(feats.mean(0), jnp.float32)
        self.f_std.value = jnp.asarray(feats.std(0) + 1e-4, jnp.float32)

    def __call__(self, feats: jax.Array, req: jax.Array) -> tuple[jax.Array, jax.Array]:
        z = (feats - self.f_mean.value) / self.f_std.value
        h = nnx.gelu(self.l1(jnp.concatenate([z, req], axis=-1)))
        h = nnx.gelu(self.l2(h))
        log_std = jnp.clip(self.log_std.value, LOG_STD_MIN, LOG_STD_MAX)
        return self.out(h), jnp.broadcast_to(log_std, (feats.shape[0], N_PARAMS))

    def log_probs(self, feats: jax.Array, req: jax.Array, actions: jax.Array) -> jax.Array:
        """Per-parameter Gaussian log-densities [B, P] of `actions` [B, P]."""
        mean, log_std = self(feats, req)
        z = (actions - mean) * jnp.exp(-log_std)
        return -0.5 * z * z - log_std - 0.5 * math.log(2 * math.pi)

    def sample(
        self, key: jax.Array, feats: jax.Array, req: jax.Array, group_size: int = 1
    ) -> tuple[jax.Array, jax.Array]:
        """`group_size` samples per input, group-contiguous: (actions, log-probs) [B*G, P]."""
        f = jnp.repeat(feats, group_size, axis=0)
        r = jnp.repeat(req, group_size, axis=0)
        mean, log_std = self(f, r)
        actions = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)
        return actions, self.log_probs(f, r, actions)

    def mode(self, feats: jax.Array, req: jax.Array) -> jax.Array:
        """The deterministic grade (the Gaussian's mean), for evaluation and serving."""
        return self(feats, req)[0]
