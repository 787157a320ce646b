"""The logical-axis rules: FSDP over `fsdp`, tensor parallelism over `model`, declared once.

Checked on abstract meshes (no devices needed), on the engine's Transformer built
abstractly, so this runs in the default suite in a second; the same layouts train to the
same weights as one device in `test_training_distributed.py` (slow).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from flax import nnx
from jax.sharding import AbstractMesh, PartitionSpec

from studio_align.errors import ConfigError
from studio_align.models.config import ModelConfig
from studio_align.models.sharding import MESH_AXES, MeshConfig, make_mesh, spec_for, state_sharding
from studio_align.models.transformer import Transformer


def _mesh(data: int, fsdp: int, model: int) -> AbstractMesh:
    return AbstractMesh((data, fsdp, model), MESH_AXES)


def test_gemma_270m_projections_split_over_fsdp_and_model() -> None:
    m = _mesh(1, 4, 2)
    assert spec_for(m, (640, 1024), ("embed", "heads"), 0) == PartitionSpec("fsdp", "model")
    assert spec_for(m, (1024, 640), ("heads", "embed"), 0) == PartitionSpec("model", "fsdp")
    assert spec_for(m, (640, 256), ("embed", "kv"), 0) == PartitionSpec("fsdp", "model")
    assert spec_for(m, (640, 2048), ("embed", "mlp"), 0) == PartitionSpec("fsdp", "model")
    assert spec_for(m, (262_144, 640), ("vocab", "embed"), 0) == PartitionSpec("model", "fsdp")
    assert spec_for(m, (640,), (None,), 0) == PartitionSpec(None)
    # a dimension the axis does not divide stays whole; the rest still splits
    assert spec_for(m, (640, 3), ("embed", "kv"), 0) == PartitionSpec("fsdp", None)
    # without a model axis nothing goes to it
    assert spec_for(_mesh(2, 4, 1), (640, 1024), ("embed", "heads"), 0) == PartitionSpec(
        "fsdp", None
    )


@pytest.mark.parametrize(
    ("layout", "split"), [((8, 1, 1), 1), ((4, 1, 2), 2), ((1, 8, 1), 8), ((1, 4, 2), 8)]
)
def test_weight_matrices_per_device_shrink_with_the_layout(
    layout: tuple[int, int, int], split: int
) -> None:
    """Every weight matrix of the Transformer holds 1/split of its elements per device."""
    model = nnx.eval_shape(lambda: Transformer(ModelConfig.tiny(64), rngs=nnx.Rngs(0)))
    params = nnx.state(model, nnx.Param)
    data, fsdp, tp = layout
    cfg = MeshConfig(data=data, fsdp=fsdp, model=tp, min_shard_size=0)
    shard = state_sharding(_mesh(*layout), params, cfg)
    leaves = jax.tree.leaves(params)
    specs = jax.tree.leaves(shard, is_leaf=lambda x: hasattr(x, "shard_shape"))
    for x, s in zip(leaves, specs, strict=True):
        if len(x.shape) == 2:
            assert np.prod(s.shard_shape(x.shape)) * split == np.prod(x.shape), (x.shape, s)


def test_mesh_sizes_must_multiply_to_the_device_count() -> None:
    with pytest.raises(ConfigError, match="data \\* fsdp \\* model"):
        make_mesh(MeshConfig(fsdp=1, model=2), jax.devices()[:1])
    assert make_mesh(MeshConfig(), jax.devices()[:1]).shape == {"data": 1, "fsdp": 1, "model": 1}
