"""A platform's own generator, registered from outside the package: it is saved, loaded,
sampled and aligned by Diffusion-DPO and Flow-GRPO as the shipped ones are, with nothing
of it inside `studio_align` (docs/flow.md, "Bring your own flow model")."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np
from flax import nnx
from flow_helpers import conds, grpo_toward_brightness

from studio_align.generation.flow_sampler import sample_ode
from studio_align.models.flow_protocol import FlowModel
from studio_align.verticals.flow.align import (
    FlowDPOConfig,
    flow_dpo,
    make_dpo_loss,
)
from studio_align.verticals.flow.checkpoint import (
    clone,
    load_flow,
    register_flow_architecture,
    save_flow,
)


@dataclasses.dataclass(frozen=True)
class PixelConfig:
    image_size: int = 8
    channels: int = 3
    n_verticals: int = 8
    n_tags: int = 16
    width: int = 8

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class PixelFlow(nnx.Module):
    """Two 3x3 convolutions; the condition (vertical, tags, time) shifts the hidden
    channels. Neither a DiT nor a U-Net: what a platform might bring."""

    def __init__(self, cfg: PixelConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.inp = nnx.Conv(cfg.channels, cfg.width, (3, 3), rngs=rngs)
        self.vertical = nnx.Embed(cfg.n_verticals, cfg.width, rngs=rngs)
        self.cond = nnx.Linear(cfg.n_tags + 1, cfg.width, rngs=rngs)
        self.out = nnx.Conv(cfg.width, cfg.channels, (3, 3), rngs=rngs)

    def __call__(self, x: Any, t: Any, vertical: Any, tags: Any) -> Any:
        c = self.vertical(vertical) + self.cond(jnp.concatenate([tags, t[:, None]], -1))
        return self.out(nnx.silu(self.inp(x) + c[:, None, None, :]))


register_flow_architecture("pixel-test", PixelConfig, PixelFlow)


def _base() -> PixelFlow:
    return PixelFlow(PixelConfig(), rngs=nnx.Rngs(0))


def test_a_registered_architecture_round_trips_by_its_name(tmp_path):
    model = _base()
    assert isinstance(model, FlowModel)
    save_flow(model, tmp_path, {"trained_by": "test"})
    back, meta = load_flow(tmp_path)
    assert type(back) is PixelFlow and meta["flow_arch"] == "pixel-test"
    verts, tags = conds(4)
    a = sample_ode(model, verts, tags, steps=3, seed=0)
    np.testing.assert_allclose(a, sample_ode(back, verts, tags, steps=3, seed=0), atol=1e-6)


def test_diffusion_dpo_aligns_a_registered_architecture(tmp_path):
    """Bright chosen over dark: the implicit reward margin rises (the loss falls)."""
    rng = np.random.default_rng(0)
    verts, tags = conds(32, seed=2)
    xw = np.clip(rng.normal(0.5, 0.2, (32, 8, 8, 3)), -1, 1).astype(np.float32)
    xl = np.clip(rng.normal(-0.5, 0.2, (32, 8, 8, 3)), -1, 1).astype(np.float32)
    pairs = {"xw": xw, "xl": xl, "vertical": verts, "tags": tags}
    batch = {**pairs, "noise": rng.standard_normal(xw.shape).astype(np.float32),
             "t": rng.uniform(0.2, 0.8, 32).astype(np.float32)}  # fmt: skip
    base = _base()
    model = clone(base)
    assert type(model) is PixelFlow
    cfg = FlowDPOConfig(steps=20, batch_size=16, learning_rate=3e-3, beta=500.0, seed=0)
    res = flow_dpo(model, base, pairs, cfg, run_dir=tmp_path / "dpo")
    loss = make_dpo_loss(base, beta=cfg.beta)
    assert float(loss(model, batch)[0]) < float(loss(base, batch)[0]) - 0.05 and res.step == 20


def test_flow_grpo_aligns_a_registered_architecture():
    """A brightness reward brightens the registered model's samples on fresh noise, for
    trained conditions and for two never trained on."""
    for before, after in grpo_toward_brightness(_base()):
        assert after > before + 0.02, (before, after)
