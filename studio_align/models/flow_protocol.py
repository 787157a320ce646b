"""What the flow samplers, Flow-GRPO and Diffusion-DPO need of a generator.

Any flax NNX module with these two members works, whatever its inside (a DiT, a U-Net,
a platform's own network):

- `cfg`: a frozen config with `image_size`, `channels`, `n_verticals`, `n_tags` and
  `to_dict()` (JSON-able; the checkpoint stores it and rebuilds the model from it);
- `model(x_t, t, vertical, tags) -> v`: the rectified-flow velocity `noise - x0` at
  `x_t = (1 - t) x0 + t noise`; `x_t` [B, H, W, C] in model space, `t` [B] in [0, 1],
  `vertical` [B] int (0 = the null condition of classifier-free guidance), `tags`
  [B, n_tags] multi-hot (all zero with vertical 0).

The samplers read `cfg.image_size` and `cfg.channels` for the noise shape and call the
model; the trainers differentiate it with `nnx` transforms, so its parameters must be
`nnx.Param`s. Checkpoints (`verticals.flow.checkpoint`) find its class by the
architecture name stored next to the config.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import jax


@runtime_checkable
class FlowModelConfig(Protocol):
    image_size: int
    channels: int
    n_verticals: int
    n_tags: int

    def to_dict(self) -> dict[str, Any]: ...


@runtime_checkable
class FlowModel(Protocol):
    cfg: Any  # a FlowModelConfig

    def __call__(
        self, x: jax.Array, t: jax.Array, vertical: jax.Array, tags: jax.Array
    ) -> jax.Array: ...
