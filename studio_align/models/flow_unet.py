"""A small conditional U-Net for rectified flow: the second `FlowModel` architecture.

Design choices: `levels` resolutions (each half the last, channels `width` at full size and
`2 * width` below it) with residual conv blocks, each block scaled and shifted by the
condition (FiLM, from the same time + vertical + tag embedding as the DiT); skip
concatenations from each level's way down to its way up; optional self-attention at the
coarsest level, so a figure's head and shoulders are placed as one shape rather than
pieced together from 3x3 neighbourhoods; a zero-initialised output convolution, so the
untrained model predicts zero velocity. No patch grid exists to leave seams. It
implements `models.flow_protocol.FlowModel`, so samplers, Flow-GRPO, Diffusion-DPO and
checkpoints take it as they take `FlowDiT`.
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
    blocks: int = 1  # residual blocks per resolution, on the way down and on the way up
    levels: int = 2  # resolutions: image_size, image_size / 2, ...
    attention: bool = False  # one self-attention layer at the coarsest resolution
    space_to_depth: int = 1  # s x s pixel blocks folded into channels around the network
    n_verticals: int = 2
    n_tags: int = 16

    def to_dict(self) -> dict[str, int | bool]:
        return asdict(self)

    def level_width(self, level: int) -> int:
        return self.width if level == 0 else 2 * self.width

    @property
    def seam_grid(self) -> int:
        """The pixel grid a seam could follow: the folded blocks, else the 8x8 grid the
        sample-quality check has always used for this architecture."""
        return self.space_to_depth if self.space_to_depth > 1 else 8


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


class SpatialAttention(nnx.Module):
    """Pre-norm multi-head self-attention over the pixels of one resolution, residual,
    its output projection zero-initialised (the block starts as the identity)."""

    def __init__(self, c: int, *, rngs: nnx.Rngs) -> None:
        self.norm = nnx.LayerNorm(c, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(
            num_heads=max(1, c // 32), in_features=c, decode=False,
            out_kernel_init=nnx.initializers.zeros_init(), rngs=rngs,
        )  # fmt: skip

    def __call__(self, x: jax.Array) -> jax.Array:
        b, h, w, c = x.shape
        seq = x.reshape(b, h * w, c)
        return x + self.attn(self.norm(seq)).reshape(b, h, w, c)


class FlowUNet(nnx.Module):
    """Velocity model `v(x_t, t, vertical, tags)`; images [B, H, W, C] in [-1, 1]."""

    def __init__(self, cfg: UNetConfig = UNetConfig(), *, rngs: nnx.Rngs) -> None:
        fold = cfg.space_to_depth
        if cfg.levels < 1 or fold < 1 or cfg.image_size % (fold * 2 ** (cfg.levels - 1)):
            raise ValueError(
                f"image_size {cfg.image_size} does not fold by {fold} and then halve "
                f"{cfg.levels - 1} times evenly"
            )
        self.cfg = cfg
        w, cw, nb = cfg.width, 4 * cfg.width, cfg.blocks
        self.t1 = nnx.Linear(w, cw, rngs=rngs)
        self.t2 = nnx.Linear(cw, cw, rngs=rngs)
        self.vertical = nnx.Embed(cfg.n_verticals + 1, cw, rngs=rngs)
        self.tags = nnx.Linear(cfg.n_tags, cw, use_bias=False, rngs=rngs)
        folded = cfg.channels * fold * fold
        self.inp = nnx.Conv(folded, w, (3, 3), rngs=rngs)
        widths = [cfg.level_width(i) for i in range(cfg.levels)]
        self.down = nnx.List([
            nnx.List([ResBlock(c, c, cw, rngs=rngs) for _ in range(nb)]) for c in widths
        ])  # fmt: skip
        self.pool = nnx.List([
            nnx.Conv(widths[i], widths[i + 1], (3, 3), strides=(2, 2), rngs=rngs)
            for i in range(cfg.levels - 1)
        ])  # fmt: skip
        self.mid_attn = SpatialAttention(widths[-1], rngs=rngs) if cfg.attention else None
        self.unpool = nnx.List([
            nnx.Conv(widths[i + 1], widths[i], (3, 3), rngs=rngs) for i in range(cfg.levels - 1)
        ])  # fmt: skip
        self.up = nnx.List([
            nnx.List([ResBlock(2 * widths[i] if j == 0 else widths[i], widths[i], cw, rngs=rngs)
                      for j in range(nb)])
            for i in range(cfg.levels - 1)
        ])  # fmt: skip
        zeros = nnx.initializers.zeros_init()
        self.out = nnx.Conv(w, folded, (3, 3), kernel_init=zeros, bias_init=zeros, rngs=rngs)

    def condition(self, t: jax.Array, vertical: jax.Array, tags: jax.Array) -> jax.Array:
        te = self.t2(nnx.silu(self.t1(timestep_embedding(t, self.cfg.width))))
        return te + self.vertical(vertical) + self.tags(tags.astype(jnp.float32))

    def __call__(
        self, x: jax.Array, t: jax.Array, vertical: jax.Array, tags: jax.Array
    ) -> jax.Array:
        c = self.condition(t, vertical, tags)
        h = self.inp(_fold(x, self.cfg.space_to_depth))
        skips = []
        for level, blocks in enumerate(self.down):
            for block in blocks:
                h = block(h, c)
            if level < len(self.pool):
                skips.append(h)
                h = self.pool[level](h)
        if self.mid_attn is not None:
            h = self.mid_attn(h)
        for level in reversed(range(len(self.up))):
            b, hh, ww, ch = h.shape
            h = jax.image.resize(h, (b, 2 * hh, 2 * ww, ch), method="nearest")
            h = jnp.concatenate([self.unpool[level](h), skips[level]], axis=-1)
            for block in self.up[level]:
                h = block(h, c)
        return _unfold(self.out(nnx.silu(h)), self.cfg.space_to_depth)


def _fold(x: jax.Array, s: int) -> jax.Array:
    """[B, H, W, C] -> [B, H/s, W/s, s*s*C]: each s x s block of pixels as one pixel."""
    if s == 1:
        return x
    b, h, w, c = x.shape
    x = x.reshape(b, h // s, s, w // s, s, c).transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(b, h // s, w // s, s * s * c)


def _unfold(x: jax.Array, s: int) -> jax.Array:
    """The inverse of `_fold`."""
    if s == 1:
        return x
    b, h, w, cs = x.shape
    c = cs // (s * s)
    x = x.reshape(b, h, w, s, s, c).transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(b, h * s, w * s, c)
