"""Tiny flow models for the flow tests (8x8 images, one block): seconds on CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import numpy as np
import pytest
from click.testing import CliRunner
from flax import nnx

from studio_align.cli import main
from studio_align.generation.flow_sampler import sample_ode, to_unit
from studio_align.models.flow import FlowConfig, FlowDiT
from studio_align.models.flow_unet import FlowUNet, UNetConfig
from studio_align.rewards import Reward
from studio_align.verticals.flow.align import FlowGRPOConfig, flow_grpo
from studio_align.verticals.flow.checkpoint import clone

TINY = FlowConfig(image_size=8, patch=4, width=32, depth=1, heads=2)
# three resolutions (8, 4, 2) and attention at the coarsest: every part the shipped base has
TINY_UNET = UNetConfig(image_size=8, width=8, levels=3, attention=True)
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


def selection_workspace(root: Path) -> Path:
    """A tiny flow base at `root/base` and `lumen`'s selections among its 8x8 candidates,
    compiled by `data compile` into `root/c` (returned): two tag sets, three events each."""
    from studio_align.simulate.flow.creators import CREATORS
    from studio_align.simulate.flow.selections import selection_logs
    from studio_align.verticals.flow.checkpoint import save_flow
    from studio_align.verticals.flow.data import label, make_dataset

    save_flow(tiny_model(), root / "base", {"trained_by": "test"})
    images, _, _ = make_dataset(24, seed=3, size=8)
    cand = (images.astype(np.float32) / 255.0).reshape(6, 4, 8, 8, 3)
    prompts = [label("product", ("white backdrop",))] * 3 + [label("storyboard", ("night",))] * 3
    log = selection_logs(root / "logs", cand, prompts, [CREATORS["lumen"]], seed=0,
                         sessions_per_creator=3)  # fmt: skip
    res = CliRunner().invoke(main, ["data", "compile", str(log), "--out", str(root / "c"),
                                    "--heldout-fraction", "0.34"])  # fmt: skip
    assert res.exit_code == 0, res.output
    return root / "c"


def brightness(images: Any) -> list[float]:
    return [float(np.mean(im)) for im in images]


def grpo_toward_brightness(base: Any) -> list[tuple[float, float]]:
    """Flow-GRPO toward brightness on a copy of `base` (12 steps, 2 of 4 conditions): the
    mean brightness of base and aligned samples on fresh noise (seeds never used in
    training), for the two trained conditions and for two never trained on."""
    model = clone(base)
    verts, tags = conds(4, seed=3)
    cfg = FlowGRPOConfig.model_validate(
        {"train": {"steps": 12, "seed": 0}, "optim": {"name": "adam", "learning_rate": 1e-2,
         "decay": "constant"}, "prompts_per_step": 2, "group_size": 6, "sde_steps": 4, "mu": 2,
         "beta": 0.0, "weights": {"brightness": 1.0}}
    )  # fmt: skip
    hist = flow_grpo(model, base, verts[:2], tags[:2], cfg,
                     rewards={"brightness": Reward("brightness", brightness)})  # fmt: skip
    assert len(hist) == 12
    out = []
    for rows in (slice(0, 2), slice(2, 4)):
        v, t = np.repeat(verts[rows], 16), np.repeat(tags[rows], 16, axis=0)
        out.append((float(to_unit(sample_ode(base, v, t, steps=8, seed=12345)).mean()),
                    float(to_unit(sample_ode(model, v, t, steps=8, seed=12345)).mean())))  # fmt: skip
    return out
