"""LoRA adapters: identity at init, adapter-only training, save/load, merge."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from studio_align.errors import CheckpointError
from studio_align.models.config import LoraConfig, ModelConfig
from studio_align.models.lora import add_lora, load_adapters, lora_state, merge_lora, save_adapters
from studio_align.models.transformer import Transformer

V = 53
LORA = LoraConfig(rank=4, alpha=8.0, targets=("q_proj", "v_proj", "o_proj", "down_proj"))


@nnx.jit
def fwd(model, tokens):
    return model(tokens, jnp.broadcast_to(jnp.arange(tokens.shape[1]), tokens.shape))


def randomize_lora(model: Transformer, seed: int = 0) -> None:
    state = lora_state(model)
    leaves, tree = jax.tree.flatten(state)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    new = [0.2 * jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves, strict=True)]
    nnx.update(model, jax.tree.unflatten(tree, new))


@pytest.fixture(scope="module")
def toks():
    return jax.random.randint(jax.random.key(7), (2, 10), 0, V)


def test_adapters_only_on_targets_and_identity_at_init(toks):
    base = Transformer(ModelConfig.tiny(V), rngs=nnx.Rngs(0))
    lora = Transformer(ModelConfig.tiny(V, lora=LORA), rngs=nnx.Rngs(0))
    paths = [".".join(map(str, p)) for p, _ in nnx.iter_graph(lora_state(lora)) if p]
    names = {p.split(".")[-2] for p in paths if p.endswith(("lora_a", "lora_b"))}
    assert names == set(LORA.targets)
    # Base weights are identical for the same seed only if adapters draw after them; compare
    # through add_lora instead, which must leave the function unchanged (lora_b = 0).
    before = fwd(base, toks)
    add_lora(base, LORA, rngs=nnx.Rngs(1))
    assert base.cfg.lora == LORA
    np.testing.assert_allclose(fwd(base, toks), before, atol=1e-5)


def test_merge_equals_unmerged(toks):
    model = Transformer(ModelConfig.tiny(V, lora=LORA), rngs=nnx.Rngs(0))
    randomize_lora(model)
    merged = merge_lora(model)
    assert merged.cfg.lora is None and not jax.tree.leaves(lora_state(merged))
    assert jax.tree.leaves(lora_state(model))  # the original keeps its adapters
    a, b = fwd(model, toks), fwd(merged, toks)
    assert (
        float(jnp.abs(a - fwd(merge_lora(Transformer(model.cfg, rngs=nnx.Rngs(0))), toks)).max())
        > 1e-3
    )
    np.testing.assert_allclose(a, b, atol=2e-5)


def test_training_updates_adapters_only(toks):
    model = Transformer(ModelConfig.tiny(V, lora=LORA), rngs=nnx.Rngs(0))
    base_before = jax.tree.map(jnp.copy, nnx.state(model, nnx.Not(nnx.LoRAParam)))
    opt = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.LoRAParam)

    @nnx.jit
    def step(model, opt):
        def loss_fn(m):
            logits = m(toks, jnp.broadcast_to(jnp.arange(toks.shape[1]), toks.shape))
            return optax.softmax_cross_entropy_with_integer_labels(
                logits[:, :-1], toks[:, 1:]
            ).mean()

        loss, grads = nnx.value_and_grad(loss_fn, argnums=nnx.DiffState(0, nnx.LoRAParam))(model)
        opt.update(model, grads)
        return loss

    losses = [float(step(model, opt)) for _ in range(5)]
    assert losses[-1] < losses[0]
    after = nnx.state(model, nnx.Not(nnx.LoRAParam))
    for x, y in zip(jax.tree.leaves(base_before), jax.tree.leaves(after), strict=True):
        np.testing.assert_array_equal(x, y)


def test_save_and_load_adapters(tmp_path, toks):
    model = Transformer(ModelConfig.tiny(V, lora=LORA), rngs=nnx.Rngs(0))
    randomize_lora(model, seed=3)
    path = save_adapters(model, tmp_path / "adapter.safetensors")
    # A fresh base model (same base seed) gets the adapters attached and loaded.
    fresh = Transformer(ModelConfig.tiny(V), rngs=nnx.Rngs(0))
    fresh_lora = Transformer(ModelConfig.tiny(V, lora=LORA), rngs=nnx.Rngs(0))
    nnx.update(fresh, nnx.state(fresh_lora, nnx.Not(nnx.LoRAParam)))
    load_adapters(fresh, path)
    assert fresh.cfg.lora == LORA
    np.testing.assert_allclose(fwd(fresh, toks), fwd(model, toks), atol=1e-6)
    with pytest.raises(CheckpointError, match="not found"):
        load_adapters(fresh, tmp_path / "missing.safetensors")
    with pytest.raises(CheckpointError, match="no LoRA adapters"):
        save_adapters(
            Transformer(ModelConfig.tiny(V), rngs=nnx.Rngs(0)), tmp_path / "x.safetensors"
        )
