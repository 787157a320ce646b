"""A small conditional U-Net for rectified flow: the second `FlowModel` architecture.

Design choices: two resolutions (full and half) with residual conv blocks, each block
scaled and shifted by the condition (FiLM, from the same time + vertical + tag embedding
as the DiT), a skip concatenation across the bottleneck and a zero-initialised output
convolution, so the untrained model predicts zero velocity. No patch grid exists to leave
seams; 3x3 convolutions give the local bias silhouettes and edges need. It implements
`models.flow_protocol.FlowModel`, so samplers, Flow-GRPO, Diffusion-DPO and checkpoints
take it as they take `FlowDiT`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import jax
import jax.numpy as jnp
from flax import nnx

from studio_align.models.flow import timestep_embedding


@dataclass(frozen=True)
class UNetConfig:
    image_size: int = 32
    channels: int = 3
    width: int = 32
    blocks: int = 1  # residual blocks per resolution
    n_verticals: int = 2
    n_tags: int = 16

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class ResBlock(nnx.Module):
    """GroupNorm-free residual block: conv, FiLM from the condition, SiLU, conv."""

    def __init__(self, c_in: int, c_out: int, cond: int, *, rngs: nnx.Rngs) -> None:
        self.conv1 = nnx.Conv(c_in, c_out, (3, 3), rngs=rngs)
        self.film = nnx.Linear(cond, 2 * c_out, rngs=rngs)
        zeros = nnx.initializers.zeros_init()
        self.conv2 = nnx.Conv(c_out, c_out, (3, 3), kernel_init=zeros, rngs=rngs)
        self.skip = nnx.Conv(c_in, c_out, (1, 1), rngs=rngs) if c_in != c_out else None

    def __call__(self, x: jax.Array, c: jax.Array) -> jax.Array:
        scale, shift = jnp.split(self.film(nnx.silu(c)), 2, axis=-1)
        h = self.conv1(nnx.silu(x))
        h = h * (1.0 + scale[:, None, None]) + shift[:, None, None]
        h = self.conv2(nnx.silu(h))
        return (x if self.skip is None else self.skip(x)) + h


class FlowUNet(nnx.Module):
    """Velocity model `v(x_t, t, vertical, tags)`; images [B, H, W, C] in [-1, 1]."""

    def __init__(self, cfg: UNetConfig = UNetConfig(), *, rngs: nnx.Rngs) -> None:
        if cfg.image_size % 2:
            raise ValueError(f"image_size {cfg.image_size} must be even")
        self.cfg = cfg
        w, cw = cfg.width, 4 * cfg.width
        self.t1 = nnx.Linear(w, cw, rngs=rngs)
        self.t2 = nnx.Linear(cw, cw, rngs=rngs)
        self.vertical = nnx.Embed(cfg.n_verticals + 1, cw, rngs=rngs)
        self.tags = nnx.Linear(cfg.n_tags, cw, use_bias=False, rngs=rngs)
        self.inp = nnx.Conv(cfg.channels, w, (3, 3), rngs=rngs)
        self.down = nnx.List([ResBlock(w, w, cw, rngs=rngs) for _ in range(cfg.blocks)])
        self.pool = nnx.Conv(w, 2 * w, (3, 3), strides=(2, 2), rngs=rngs)
        self.mid = nnx.List([ResBlock(2 * w, 2 * w, cw, rngs=rngs) for _ in range(cfg.blocks)])
        self.unpool = nnx.Conv(2 * w, w, (3, 3), rngs=rngs)
        self.up = nnx.List(
            [ResBlock(2 * w if i == 0 else w, w, cw, rngs=rngs) for i in range(cfg.blocks)]
        )
        zeros = nnx.initializers.zeros_init()
        self.out = nnx.Conv(w, cfg.channels, (3, 3), kernel_init=zeros, bias_init=zeros, rngs=rngs)

    def condition(self, t: jax.Array, vertical: jax.Array, tags: jax.Array) -> jax.Array:
        te = self.t2(nnx.silu(self.t1(timestep_embedding(t, self.cfg.width))))
        return te + self.vertical(vertical) + self.tags(tags.astype(jnp.float32))

    def __call__(
        self, x: jax.Array, t: jax.Array, vertical: jax.Array, tags: jax.Array
    ) -> jax.Array:
        c = self.condition(t, vertical, tags)
        h = self.inp(x)
        for block in self.down:
            h = block(h, c)
        skip = h
        h = self.pool(h)
        for block in self.mid:
            h = block(h, c)
        b, hh, ww, ch = h.shape
        h = jax.image.resize(h, (b, 2 * hh, 2 * ww, ch), method="nearest")
        h = jnp.concatenate([self.unpool(h), skip], axis=-1)
        for block in self.up:
            h = block(h, c)
        return self.out(nnx.silu(h))
