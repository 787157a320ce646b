"""Parity with the reference implementation: transformers' Gemma3ForCausalLM (PyTorch, CPU).

A tiny random Gemma 3 (two sliding-window layers with window 4, a global one, a sliding
one; distinct RoPE bases, linear RoPE scaling on global layers, final-logit soft-cap,
random non-zero norm weights) is saved with `save_pretrained`, loaded into the engine,
and both compute logits for a sequence longer than the window. Then the engine saves it
back and transformers reloads that directory. transformers is a test dependency only.
"""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from studio_align.models.config import LoraConfig  # noqa: E402
from studio_align.models.hf import load_hf, save_hf  # noqa: E402

TOL = 1e-4  # float32
LAYER_TYPES = ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"]


def _hf_config():  # type: ignore[no-untyped-def]
    return transformers.Gemma3TextConfig(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=4,
        layer_types=LAYER_TYPES, query_pre_attn_scalar=24, max_position_embeddings=128,
        final_logit_softcapping=30.0,
        rope_parameters={
            "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10_000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
        },
        attn_implementation="eager",
    )  # fmt: skip


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    model = transformers.Gemma3ForCausalLM(_hf_config()).eval()
    with torch.no_grad():
        for p in model.parameters():  # norms start at 0 in HF: perturb everything
            p.add_(torch.randn_like(p) * 0.3)
    d = tmp_path_factory.mktemp("parity") / "hf"
    model.save_pretrained(d)
    return model, d


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 96, (3, 13)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, 9:] = 0  # right padding
    mask[2, 5:] = 0
    return ids, mask


def _torch_logits(model, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    with torch.no_grad():
        out = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask))
    return out.logits.float().numpy()


def _engine_logits(model, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    return np.asarray(model(jnp.asarray(ids, jnp.int32), None, jnp.asarray(mask, bool)))


def _max_diff(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> float:
    return float(np.abs(a - b)[mask.astype(bool)].max())


def test_load_matches_transformers(reference) -> None:  # type: ignore[no-untyped-def]
    hf_model, d = reference
    ids, mask = _inputs()
    h = load_hf(d, tokenizer=False)
    assert [h.config.is_local(i) for i in range(4)] == [True, True, False, True]
    ref, got = _torch_logits(hf_model, ids, mask), _engine_logits(h.model, ids, mask)
    diff = _max_diff(ref, got, mask)
    print(f"\nparity load: max |logit diff| = {diff:.3g} (max |logit| {np.abs(ref).max():.3g})")
    assert diff < TOL
    # the comparison is sensitive to the window: without it, logits past it differ
    wide = load_hf(d, tokenizer=False)
    wide.model.cfg = wide.model.cfg.model_copy(update={"sliding_window": 64})
    assert _max_diff(ref, _engine_logits(wide.model, ids, mask), mask) > 100 * TOL


def test_round_trip_through_transformers(reference, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    hf_model, d = reference
    ids, mask = _inputs()
    h = load_hf(d, tokenizer=False)
    save_hf(h.model, tmp_path / "back", base_config=h.hf_config)
    back = transformers.Gemma3ForCausalLM.from_pretrained(
        tmp_path / "back", attn_implementation="eager"
    ).eval()
    assert back.config.layer_types == LAYER_TYPES and back.config.sliding_window == 4
    ref = _torch_logits(hf_model, ids, mask)
    again = _torch_logits(back, ids, mask)
    engine = _engine_logits(h.model, ids, mask)
    d_ref, d_engine = _max_diff(ref, again, mask), _max_diff(engine, again, mask)
    print(f"\nparity round trip: vs original {d_ref:.3g}, vs engine {d_engine:.3g}")
    assert d_ref < TOL and d_engine < TOL


def test_merged_lora_round_trip(reference, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, d = reference
    ids, mask = _inputs()
    h = load_hf(
        d, tokenizer=False, lora=LoraConfig(rank=4, targets=("q_proj", "v_proj", "up_proj"))
    )
    rng = np.random.default_rng(1)
    for _, var in nnx.to_flat_state(nnx.state(h.model, nnx.LoRAParam)):
        v = var.get_value()
        var.set_value(jnp.asarray(rng.normal(0, 0.2, v.shape), v.dtype))
    tuned = _engine_logits(h.model, ids, mask)
    save_hf(h.model, tmp_path / "tuned", base_config=h.hf_config)
    back = transformers.Gemma3ForCausalLM.from_pretrained(
        tmp_path / "tuned", attn_implementation="eager"
    ).eval()
    diff = _max_diff(tuned, _torch_logits(back, ids, mask), mask)
    print(f"\nparity merged LoRA: {diff:.3g}")
    assert diff < TOL


def test_saved_tokenizer_loads_in_transformers(tmp_path: Path) -> None:
    from studio_align.catalog import default_catalog
    from studio_align.models.config import ModelConfig
    from studio_align.models.hf import add_special_tokens, extend_vocab
    from studio_align.models.tokenizer import Tokenizer
    from studio_align.models.transformer import Transformer
    from studio_align.router.format import special_tokens

    tok = Tokenizer.train(["add music to my video", "把这张图做成视频"] * 10, vocab_size=300)
    add_special_tokens(tok, special_tokens(default_catalog()))
    model = extend_vocab(Transformer(ModelConfig.tiny(300), rngs=nnx.Rngs(0)), tok.vocab_size)
    save_hf(model, tmp_path / "m", tokenizer=tok)
    hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "m")
    text = "<bos>add music<plan><step:audio.music><eos>"
    assert hf_tok.encode(text, add_special_tokens=False) == tok.encode(text)
    assert hf_tok.eos_token == "<eos>" and hf_tok.pad_token_id == tok.pad_id


def test_bfloat16_error_matches_the_references_own(reference) -> None:  # type: ignore[no-untyped-def]
    """bf16 cannot match f32 to 1e-4; it must be as close as transformers' own bf16 is."""
    hf_model, d = reference
    ids, mask = _inputs()
    ref = _torch_logits(hf_model, ids, mask)
    hf_bf16 = transformers.Gemma3ForCausalLM.from_pretrained(
        d, attn_implementation="eager", dtype=torch.bfloat16
    ).eval()
    theirs = _max_diff(ref, _torch_logits(hf_bf16, ids, mask), mask)
    ours = _max_diff(ref, _engine_logits(load_hf(d, dtype="bfloat16").model, ids, mask), mask)
    print(f"\nbf16 vs f32 reference: engine {ours:.3g}, transformers {theirs:.3g}")
    assert ours < 1.5 * theirs + 1e-3
