"""Gemma-style decoder: structure, masking semantics, cache equivalence, log-probs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from studio_align.models.config import ModelConfig
from studio_align.models.logprobs import sequence_logps, token_logps
from studio_align.models.transformer import Transformer, positions_from_mask

V = 61


@nnx.jit
def fwd(model, tokens, positions, mask=None):
    return model(tokens, positions, mask)


@nnx.jit
def fwd_cached(model, tokens, positions, mask, cache):
    return model.forward_cached(tokens, positions, mask, cache)


def make(cfg: ModelConfig | None = None, seed: int = 0) -> Transformer:
    model = Transformer(cfg or ModelConfig.tiny(V), rngs=nnx.Rngs(seed))
    # Non-zero norm scales so a missed norm would show up in the tests.
    for path, var in nnx.iter_graph(model):
        if isinstance(var, nnx.Param) and path[-1] == "scale":
            var[...] = 0.1 * jax.random.normal(jax.random.key(len(path)), var.shape, var.dtype)
    return model


def test_shapes_and_param_count():
    cfg = ModelConfig.tiny(V)
    model = make(cfg)
    logits = fwd(model, jnp.zeros((3, 7), jnp.int32), jnp.tile(jnp.arange(7), (3, 1)))
    assert logits.shape == (3, 7, V) and logits.dtype == jnp.float32
    n = sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    assert n == cfg.num_params()
    assert ModelConfig.gemma3_270m().num_params() == pytest.approx(268e6, rel=0.01)
    assert 3e6 < ModelConfig.router().num_params() < 8e6


def test_parameter_names_mirror_hugging_face_gemma3():
    model = make()
    paths = {".".join(map(str, p)) for p, v in nnx.iter_graph(model) if isinstance(v, nnx.Param)}
    layer0 = {p.split(".", 2)[2] for p in paths if p.startswith("layers.0.")}
    assert layer0 == {
        "self_attn.q_proj.kernel", "self_attn.k_proj.kernel", "self_attn.v_proj.kernel",
        "self_attn.o_proj.kernel", "self_attn.q_norm.scale", "self_attn.k_norm.scale",
        "input_layernorm.scale", "post_attention_layernorm.scale",
        "pre_feedforward_layernorm.scale", "post_feedforward_layernorm.scale",
        "mlp.gate_proj.kernel", "mlp.up_proj.kernel", "mlp.down_proj.kernel",
    }  # fmt: skip
    assert {"embed_tokens.embedding", "norm.scale"} <= paths
    c = model.cfg
    assert model.layers[0].self_attn.q_proj.kernel.shape == (c.d_model, c.num_heads * c.head_dim)
    assert model.layers[0].self_attn.k_proj.kernel.shape == (c.d_model, c.num_kv_heads * c.head_dim)


def test_gemma3_layer_pattern():
    cfg = ModelConfig.gemma3_270m()
    assert [i for i in range(cfg.num_layers) if not cfg.is_local(i)] == [5, 11, 17]
    tiny = ModelConfig.tiny(V)
    assert [tiny.is_local(i) for i in range(2)] == [True, False]
    explicit = ModelConfig.tiny(V, layer_types=("full_attention", "sliding_attention"))
    assert [explicit.is_local(i) for i in range(2)] == [False, True]
    with pytest.raises(ValueError, match="num_kv_heads"):
        ModelConfig.tiny(V, num_heads=3)


def test_sliding_window_receptive_field():
    # Two local layers, window 4: position t sees tokens t-3..t per layer, t-6..t in all.
    cfg = ModelConfig.tiny(V, sliding_window=4, layer_types=("sliding_attention",) * 2)
    model = make(cfg)
    toks = jax.random.randint(jax.random.key(1), (1, 12), 1, V)
    pos = jnp.arange(12)[None]
    a = fwd(model, toks, pos)
    b = fwd(model, toks.at[0, 0].set((toks[0, 0] + 1) % V), pos)
    diff = jnp.abs(a - b).max(axis=-1)[0]
    assert float(diff[6]) > 1e-4  # exactly at the edge of the receptive field
    assert float(diff[7:].max()) == 0.0
    # A global model sees everything.
    g = make(ModelConfig.tiny(V, sliding_window=None))
    d = jnp.abs(fwd(g, toks, pos) - fwd(g, toks.at[0, 0].set((toks[0, 0] + 1) % V), pos)).max()
    assert float(d) > 1e-4


def test_padding_left_and_right_agree_on_real_tokens():
    model = make()
    rng = np.random.default_rng(0)
    lens = [5, 9, 3]
    t = 10
    seqs = [rng.integers(1, V, n) for n in lens]
    right = np.zeros((3, t), np.int32)
    left = np.zeros((3, t), np.int32)
    rmask = np.zeros((3, t), bool)
    lmask = np.zeros((3, t), bool)
    for i, s in enumerate(seqs):
        right[i, : len(s)], rmask[i, : len(s)] = s, True
        left[i, t - len(s) :], lmask[i, t - len(s) :] = s, True
    lr = fwd(model, jnp.asarray(right), positions_from_mask(jnp.asarray(rmask)), jnp.asarray(rmask))
    ll = fwd(model, jnp.asarray(left), positions_from_mask(jnp.asarray(lmask)), jnp.asarray(lmask))
    for i, n in enumerate(lens):
        single = fwd(model, jnp.asarray(seqs[i])[None], jnp.arange(n)[None])[0]
        np.testing.assert_allclose(lr[i, :n], single, atol=1e-5)
        np.testing.assert_allclose(ll[i, t - n :], single, atol=1e-5)


@pytest.mark.parametrize("window", [None, 4])
def test_cache_prefill_and_decode_equal_full_forward(window):
    cfg = ModelConfig.tiny(V, sliding_window=window)
    model = make(cfg)
    rng = np.random.default_rng(1)
    lens = np.array([3, 6])
    prompt_bucket, total = 8, 20  # sequences run well past the window
    toks = rng.integers(1, V, (2, total)).astype(np.int32)
    # Prefill a right-padded prompt block, then feed each sample its own continuation.
    prompt = np.where(np.arange(prompt_bucket)[None] < lens[:, None], toks[:, :prompt_bucket], 0)
    pmask = np.arange(prompt_bucket)[None] < lens[:, None]
    cache = model.init_cache(2, prompt_bucket + total)
    logits, cache = fwd_cached(
        model,
        jnp.asarray(prompt),
        positions_from_mask(jnp.asarray(pmask)),
        jnp.asarray(pmask),
        cache,
    )
    got = [[logits[b, n - 1]] for b, n in enumerate(lens)]
    steps = total - lens.max()
    for s in range(steps):
        pos = lens + s
        tok = toks[np.arange(2), pos]
        logits, cache = fwd_cached(
            model,
            jnp.asarray(tok)[:, None],
            jnp.asarray(pos)[:, None],
            jnp.ones((2, 1), bool),
            cache,
        )
        for b in range(2):
            got[b].append(logits[b, 0])
    for b, n in enumerate(lens):
        full = fwd(model, jnp.asarray(toks[b : b + 1, : n + steps]), jnp.arange(n + steps)[None])[0]
        np.testing.assert_allclose(jnp.stack(got[b]), full[n - 1 :], atol=2e-5)


@pytest.mark.slow  # over 10 s; the default suite stays under 15 minutes on 2 cores
def test_bfloat16_compute():
    cfg = ModelConfig.tiny(V, dtype="bfloat16", param_dtype="bfloat16")
    model = make(cfg)
    ref = make(ModelConfig.tiny(V))
    nnx.update(model, jax.tree.map(lambda x: x.astype(jnp.bfloat16), nnx.state(ref)))
    toks = jax.random.randint(jax.random.key(0), (2, 9), 0, V)
    pos = jnp.tile(jnp.arange(9), (2, 1))
    out = fwd(model, toks, pos)
    assert model.embed_tokens.embedding.dtype == jnp.bfloat16 and out.dtype == jnp.float32
    assert jnp.all(jnp.isfinite(out))
    assert float(jnp.abs(out - fwd(ref, toks, pos)).max()) < 0.3


def test_token_and_sequence_logps():
    model = make()
    toks = jax.random.randint(jax.random.key(3), (2, 9), 1, V)
    mask = jnp.array([[True] * 9, [True] * 6 + [False] * 3])
    toks = jnp.where(mask, toks, 0)
    lp = nnx.jit(token_logps)(model, toks, mask)
    assert lp.shape == (2, 8)
    ref = jax.nn.log_softmax(fwd(model, toks[:1], jnp.arange(9)[None]), -1)[0]
    np.testing.assert_allclose(lp[0], ref[jnp.arange(8), toks[0, 1:]], atol=1e-5)
    assert jnp.all(lp[1, 5:] == 0.0)
    # A right-padded row scores its completion exactly as the unpadded sequence does.
    loss_mask = jnp.array([[0, 0, 0, 1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 0, 0, 0]])
    seq = nnx.jit(sequence_logps)(model, toks, loss_mask)
    alone = nnx.jit(sequence_logps)(model, toks[1:2, :6], loss_mask[1:2, :6])
    np.testing.assert_allclose(seq[1], alone[0], rtol=1e-5)
    np.testing.assert_allclose(seq[0], lp[0, 2:].sum(), rtol=1e-5)
    # Gradients flow and are finite under jit.
    grads = nnx.jit(nnx.grad(lambda m: -sequence_logps(m, toks, loss_mask).mean()))(model)
    assert all(jnp.all(jnp.isfinite(g)) for g in jax.tree.leaves(grads))
