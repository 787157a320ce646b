"""Packed rows (`training/packed.py`): the same SFT loss, gradients and replay NLL as the
plain right-padded batch, and the loop accepts packed rows under gradient accumulation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from studio_align.errors import DataError
from studio_align.models.config import ModelConfig
from studio_align.models.sharding import MeshConfig, make_mesh
from studio_align.models.transformer import Transformer
from studio_align.training.batches import ArrayBatches
from studio_align.training.packed import PackedBatches, pack_rows
from studio_align.training.replay import PREFIX, replay_nll
from studio_align.training.sft import sft_loss
from studio_align.training.supervised import place_batch

CFG = ModelConfig(
    vocab_size=64, d_model=32, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=16,
    d_ff=64, max_seq_len=64, sliding_window=4, sliding_window_pattern=2,
)  # fmt: skip


def _batch(n: int = 12, length: int = 32, seed: int = 0, prefix: str = "") -> dict:
    rng = np.random.default_rng(seed)
    lens = rng.integers(3, length + 1, n)
    lens[0] = length  # one row as long as the rows it is packed into
    tokens = rng.integers(1, CFG.vocab_size, (n, length)).astype(np.int32)
    attn = np.arange(length)[None] < lens[:, None]
    prompt = rng.integers(0, 3, n)  # some prompts empty: the first token is then a target
    loss = attn & (np.arange(length)[None] >= prompt[:, None])
    tokens[~attn] = 0
    return {f"{prefix}tokens": tokens, f"{prefix}attn": attn, f"{prefix}loss": loss}


def _jnp(batch: dict) -> dict:
    return {k: jnp.asarray(v) for k, v in batch.items()}


def test_pack_rows_keeps_every_token_once_and_fewer_rows():
    batch = _batch()
    packed = pack_rows(batch, 32, rows_multiple=2)
    rows = packed["tokens"].shape[0]
    assert rows % 2 == 0 and rows < 12
    assert packed["attn"].sum() == batch["attn"].sum()
    assert sorted(packed["tokens"][packed["attn"]].tolist()) == sorted(
        batch["tokens"][batch["attn"]].tolist()
    )
    # each segment's positions restart at 0; padding is segment 0
    seg, pos = packed["segments"], packed["positions"]
    starts = packed["attn"] & (pos == 0)
    assert starts.sum() == 12
    assert not (packed["loss"] & starts).any()  # a segment's first token is never a target
    assert (seg[~packed["attn"]] == 0).all() and (seg[packed["attn"]] > 0).all()


def test_pack_rows_refuses_a_sequence_longer_than_the_rows():
    with pytest.raises(ValueError, match="does not fit"):
        pack_rows(_batch(length=32), 16)


def test_packed_sft_loss_and_grads_equal_the_plain_batch():
    model = Transformer(CFG, rngs=nnx.Rngs(0))
    batch = _batch()
    grad = nnx.jit(nnx.value_and_grad(sft_loss, has_aux=True))  # jitted: eager is ~30 s
    (plain, pm), pg = grad(model, _jnp(batch))
    (packed, km), kg = grad(model, _jnp(pack_rows(batch, 32)))
    # a sequence's first token is no target either way (its own row's position 0)
    assert float(pm["weight"]) == float(km["weight"]) == float(batch["loss"][:, 1:].sum())
    np.testing.assert_allclose(float(packed), float(plain), rtol=1e-5)
    np.testing.assert_allclose(float(km["token_acc"]), float(pm["token_acc"]), rtol=1e-6)
    for a, b in zip(jax.tree.leaves(nnx.state(pg)), jax.tree.leaves(nnx.state(kg)), strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-6)


def test_packed_replay_nll_equals_the_plain_batch():
    model = Transformer(CFG, rngs=nnx.Rngs(1))
    batch = _batch(seed=3, prefix=PREFIX)
    nll = nnx.jit(replay_nll)
    plain = nll(model, _jnp(batch))
    packed = nll(model, _jnp(pack_rows(batch, 32, prefix=PREFIX)))
    np.testing.assert_allclose(float(packed), float(plain), rtol=1e-5)


def test_packed_batches_pack_each_micro_batch_alone_and_pass_other_fields():
    arrays = {**_batch(n=16), "weight": np.arange(16.0)}
    source = PackedBatches(ArrayBatches(arrays, 8, seed=0), 32, rows_multiple=2, groups=2)
    out = source(0)
    rows = out["tokens"].shape[0]
    assert rows % 4 == 0 and out["weight"].shape == (8,)
    plain = ArrayBatches(arrays, 8, seed=0)(0)
    for g in range(2):  # micro-batch g's rows hold exactly its own examples' tokens
        half = slice(g * rows // 2, (g + 1) * rows // 2)
        mine = slice(g * 4, (g + 1) * 4)
        got = sorted(out["tokens"][half][out["attn"][half]].tolist())
        assert got == sorted(plain["tokens"][mine][plain["attn"][mine]].tolist())


def test_loop_places_packed_rows_and_still_refuses_a_wrong_batch_size():
    mesh = make_mesh(MeshConfig(), jax.devices()[:1])
    packed = {**pack_rows(_batch(n=8), 32, groups=2), "weight": np.zeros(8)}
    placed = place_batch(packed, 2, 8, mesh)
    assert placed["tokens"].shape[0] == 2 and placed["weight"].shape == (2, 4)
    with pytest.raises(DataError, match="expected leading 8"):
        place_batch({"weight": np.zeros(6)}, 2, 8, mesh)
