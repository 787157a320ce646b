"""`[mesh]`: how devices are arranged; JAX-free, so reading a run config imports no JAX."""

from __future__ import annotations

from pydantic import Field

from studio_align.config import Strict


class MeshConfig(Strict):
    """`[mesh]`: how devices are arranged. `data = -1` takes every device fsdp and model leave."""

    data: int = Field(-1, ge=-1)
    fsdp: int = Field(1, ge=1)
    model: int = Field(1, ge=1)  # tensor parallelism: keep it within a host's fast links
    min_shard_size: int = Field(4096, ge=0)  # tensors smaller than this stay replicated
