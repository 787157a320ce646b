"""Tiny flow models for the flow tests (8x8 images, one block): seconds on CPU."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest
from flax import nnx

from studio_align.models.flow import FlowConfig, FlowDiT
from studio_align.models.flow_unet import FlowUNet, UNetConfig

TINY = FlowConfig(image_size=8, patch=4, width=32, depth=1, heads=2)
TINY_UNET = UNetConfig(image_size=8, width=8)
# every FlowModel architecture the sampler and alignment tests run on (the U-Net's
# variants compile a second model: slow set)
ARCHS = ("dit", pytest.param("unet", marks=pytest.mark.slow))


def tiny_model(seed: int = 0, *, perturb: float = 0.02, arch: str = "dit") -> Any:
    """A tiny model with every weight (zero-initialised gates included) perturbed, so its
    velocity depends on the input, time and condition."""
    model = (
        FlowDiT(TINY, rngs=nnx.Rngs(seed))
        if arch == "dit"
        else FlowUNet(TINY_UNET, rngs=nnx.Rngs(seed))
    )
    state = nnx.state(model, nnx.Param)
    keys = iter(jax.random.split(jax.random.key(seed + 1), len(jax.tree.leaves(state))))
    nnx.update(
        model, jax.tree.map(lambda p: p + perturb * jax.random.normal(next(keys), p.shape), state)
    )
    return model


def conds(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(1, 3, n).astype(np.int32), (rng.uniform(size=(n, 16)) < 0.3).astype(
        np.float32
    )
