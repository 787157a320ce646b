"""Bring your own flow model: any `FlowModel` is sampled, saved, loaded and aligned alike."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from flow_helpers import conds, tiny_model

from studio_align.algorithms.flow import interpolate, velocity_anchor
from studio_align.errors import CheckpointError
from studio_align.generation.flow_sampler import sample_ode
from studio_align.models.flow_protocol import FlowModel
from studio_align.models.flow_unet import FlowUNet, UNetConfig
from studio_align.verticals.flow.align import FlowDPOConfig, flow_dpo, make_dpo_loss
from studio_align.verticals.flow.checkpoint import clone, load_flow, save_flow


@pytest.mark.slow  # over 7 s on two cores; default suite under 15 minutes
@pytest.mark.parametrize("arch", ["dit", "unet"])
def test_every_architecture_round_trips_through_a_checkpoint(arch, tmp_path):
    model = tiny_model(3, arch=arch)
    assert isinstance(model, FlowModel)
    save_flow(model, tmp_path, {"trained_by": "test"})
    back, meta = load_flow(tmp_path)
    assert type(back) is type(model) and meta["flow_arch"] == arch
    verts, tags = conds(4)
    a = sample_ode(model, verts, tags, steps=3, seed=0)
    b = sample_ode(back, verts, tags, steps=3, seed=0)
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_the_unet_starts_at_zero_velocity_at_every_depth_and_names_a_bad_size():
    verts, tags = conds(2)
    x = jnp.ones((2, 16, 16, 3))
    for levels, attention, fold in ((1, False, 1), (2, False, 1), (3, True, 1), (2, True, 2)):
        cfg = UNetConfig(
            image_size=16, width=8, levels=levels, attention=attention, space_to_depth=fold
        )
        v = FlowUNet(cfg, rngs=nnx.Rngs(0))(x, jnp.full((2,), 0.5), verts, tags)
        assert v.shape == x.shape and float(jnp.abs(v).max()) == 0.0
    with pytest.raises(ValueError, match="image_size 10 does not fold by 1 and then halve 2"):
        FlowUNet(UNetConfig(image_size=10, levels=3), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="image_size 12 does not fold by 2 and then halve 2"):
        FlowUNet(UNetConfig(image_size=12, levels=3, space_to_depth=2), rngs=nnx.Rngs(0))


@pytest.mark.slow  # over 7 s on two cores; default suite under 15 minutes
def test_a_folded_unet_reads_each_pixel_block_as_one_position():
    """space_to_depth = 2: the network sees 2x2 blocks as pixels of 12 channels, its output
    unfolds to the image's own layout (every pixel from a channel of its own), and the seam
    check looks at the block grid."""
    from studio_align.models.flow_unet import _fold, _unfold

    x = jax.random.normal(jax.random.key(0), (2, 8, 8, 3))
    folded = _fold(x, 2)
    assert folded.shape == (2, 4, 4, 12)
    np.testing.assert_array_equal(folded[0, 1, 2, 3:6], x[0, 2, 5])  # block (1, 2), pixel (0, 1)
    np.testing.assert_array_equal(_unfold(folded, 2), x)
    cfg = UNetConfig(image_size=8, width=8, levels=2, space_to_depth=2)
    assert cfg.seam_grid == 2 and UNetConfig().seam_grid == 8
    model = FlowUNet(cfg, rngs=nnx.Rngs(0))
    model.out.kernel.value = jax.random.normal(jax.random.key(1), model.out.kernel.value.shape)
    verts, tags = conds(2)
    v = model(x, jnp.full((2,), 0.5), verts, tags)
    assert v.shape == x.shape and float(jnp.abs(v).min()) > 0.0


def test_an_unregistered_class_is_one_clear_error(tmp_path):
    class Mine(nnx.Module):
        def __init__(self) -> None:
            self.cfg = None

    with pytest.raises(CheckpointError, match="Mine: not a registered flow architecture"):
        save_flow(Mine(), tmp_path)


def _bright_over_dark(n: int = 32) -> tuple[dict, dict]:
    """n pairs of 8x8 images, a bright one chosen over a dark one, and a fixed batch of
    them (noise, t) to score losses on."""
    rng = np.random.default_rng(0)
    verts, tags = conds(n, seed=2)
    xw = np.clip(rng.normal(0.5, 0.2, (n, 8, 8, 3)), -1, 1).astype(np.float32)
    xl = np.clip(rng.normal(-0.5, 0.2, (n, 8, 8, 3)), -1, 1).astype(np.float32)
    pairs = {"xw": xw, "xl": xl, "vertical": verts, "tags": tags}
    batch = {**pairs, "noise": rng.standard_normal(xw.shape).astype(np.float32),
             "t": rng.uniform(0.2, 0.8, n).astype(np.float32)}  # fmt: skip
    return pairs, batch


@pytest.mark.slow  # trains twice (~1 min on a busy 2-core VM)
@pytest.mark.parametrize("arch", ["dit", "unet"])
def test_diffusion_dpo_prefers_the_chosen_images(arch, tmp_path):
    """DPO on pairs (bright chosen over dark) raises the implicit reward margin."""
    base = tiny_model(0, arch=arch)
    model = clone(base)
    pairs, batch = _bright_over_dark()
    cfg = FlowDPOConfig(steps=30, batch_size=16, learning_rate=3e-3, beta=500.0, seed=0)
    res = flow_dpo(model, base, pairs, cfg, run_dir=tmp_path / "dpo")
    loss_fn = make_dpo_loss(base, beta=cfg.beta)
    before, _ = loss_fn(base, batch)
    after, _ = loss_fn(model, batch)
    assert float(after) < float(before) - 0.05 and res.step == 30


@pytest.mark.slow  # trains the tiny U-Net three times
def test_the_velocity_anchor_keeps_diffusion_dpo_near_its_reference(tmp_path):
    """At anchor 0 the loss is plain Diffusion-DPO's; with an anchor the same steps move the
    model's velocities less from the reference's on fresh noise, and it still learns the
    preference (its DPO loss falls)."""
    base = tiny_model(0, arch="unet")
    pairs, batch = _bright_over_dark()
    verts, tags = pairs["vertical"], pairs["tags"]
    plain = make_dpo_loss(base, beta=500.0)
    moved = clone(base)
    flow_dpo(moved, base, pairs, FlowDPOConfig(steps=5, batch_size=16, learning_rate=3e-3,
             beta=500.0), run_dir=tmp_path / "m")  # fmt: skip
    a, _ = plain(moved, batch)
    b, m = make_dpo_loss(base, beta=500.0, anchor=0.0)(moved, batch)
    assert float(a) == float(b) and "anchor" not in m

    def drift(model):
        x = interpolate(
            jnp.asarray(pairs["xw"]), jnp.asarray(batch["noise"]), jnp.asarray(batch["t"])
        )
        t = jnp.asarray(batch["t"])
        return float(velocity_anchor(model(x, t, verts, tags), base(x, t, verts, tags)).mean())

    out = {}
    for anchor in (0.0, 200.0):
        model = clone(base)
        cfg = FlowDPOConfig(steps=30, batch_size=16, learning_rate=3e-3, beta=500.0,
                            anchor=anchor)  # fmt: skip
        flow_dpo(model, base, pairs, cfg, run_dir=tmp_path / str(anchor))
        out[anchor] = (drift(model), float(plain(model, batch)[0]))
    before = float(plain(base, batch)[0])
    assert out[200.0][0] < 0.5 * out[0.0][0], out
    assert out[200.0][1] < before - 0.02, (before, out)


@pytest.mark.slow  # compiles a Diffusion-DPO step of the tiny model
def test_diffusion_dpo_early_stop_keeps_the_last_check_that_passed(tmp_path):
    """The quality stop of Flow-GRPO guards Diffusion-DPO too: checks at steps 3 and 6, the
    second fails, so the weights seen at step 3 are kept and training ends at step 6."""
    base = tiny_model(0)
    model = clone(base)
    rng = np.random.default_rng(0)
    verts, tags = conds(16, seed=2)
    xw = rng.normal(0.5, 0.2, (16, 8, 8, 3)).astype(np.float32)
    xl = rng.normal(-0.5, 0.2, (16, 8, 8, 3)).astype(np.float32)
    pairs = {"xw": xw, "xl": xl, "vertical": verts, "tags": tags}
    cfg = FlowDPOConfig(steps=12, batch_size=8, learning_rate=3e-3, beta=500.0, check_every=3)
    seen = []

    def stop(m):
        seen.append([np.asarray(x) for x in jax.tree.leaves(nnx.state(m, nnx.Param))])
        return len(seen) == 2

    res = flow_dpo(model, base, pairs, cfg, run_dir=tmp_path / "dpo", stop=stop)
    assert res.step == 6 and res.history[-1]["early_stop_kept"] == 3.0
    kept = [np.asarray(x) for x in jax.tree.leaves(nnx.state(model, nnx.Param))]
    for a, b in zip(kept, seen[0], strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(kept, seen[1], strict=True))


@pytest.mark.slow  # trains the tiny model up to five times
def test_the_anchor_ladder_keeps_the_first_weight_the_stop_passes(tmp_path):
    """Rungs train from the starting weights: the one kept equals a plain run at its
    weight; when every rung fails, the starting weights are kept."""
    base = tiny_model(0)
    pairs, _ = _bright_over_dark(16)
    kw = {"steps": 4, "batch_size": 8, "learning_rate": 3e-3, "beta": 500.0}
    seen: list[int] = []

    def second_passes(m):
        seen.append(1)
        return len(seen) < 2  # True = stop: the first rung fails, the second passes

    model = clone(base)
    cfg = FlowDPOConfig(**kw, anchor_ladder=[0.0, 50.0, 400.0])
    res = flow_dpo(model, base, pairs, cfg, run_dir=tmp_path / "l", stop=second_passes)
    assert res.history[-1]["anchor_kept"] == 50.0 and len(seen) == 2
    plain = clone(base)
    flow_dpo(plain, base, pairs, FlowDPOConfig(**kw, anchor=50.0), run_dir=tmp_path / "p")
    leaves = lambda m: jax.tree.leaves(nnx.state(m, nnx.Param))  # noqa: E731
    for a, b in zip(leaves(model), leaves(plain), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)

    model = clone(base)
    cfg = FlowDPOConfig(**kw, anchor_ladder=[0.0, 50.0])
    res = flow_dpo(model, base, pairs, cfg, run_dir=tmp_path / "n", stop=lambda m: True)
    assert res.history[-1]["anchor_kept"] == -1.0
    for a, b in zip(leaves(model), leaves(base), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_an_anchor_ladder_is_one_way_to_stop():
    with pytest.raises(ValueError, match="choose one way to stop"):
        FlowDPOConfig(anchor_ladder=[0.0, 2000.0], check_every=10)
    with pytest.raises(ValueError, match="one or more weights >= 0"):
        FlowDPOConfig(anchor_ladder=[])
    with pytest.raises(ValueError, match="one or more weights >= 0"):
        FlowDPOConfig(anchor_ladder=[-1.0])
