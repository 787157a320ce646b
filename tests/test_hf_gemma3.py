"""Loading and saving Hugging Face Gemma 3 directories (no transformers needed here).

Checkpoints are made by the engine itself (`save_hf` of a random tiny model) and then
altered on disk, so each error path is exercised on a real file. Parity with the
reference implementation is in `test_hf_parity.py`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from studio_align.errors import ModelLoadError
from studio_align.models.config import LoraConfig, ModelConfig
from studio_align.models.hf import add_special_tokens, extend_vocab, load_hf, save_hf
from studio_align.models.hf_config import read_hf_config, to_model_config
from studio_align.models.safetensors_io import SafetensorsDir, save_safetensors
from studio_align.models.tokenizer import Tokenizer
from studio_align.models.transformer import Transformer

TOKENS = np.array([[5, 9, 17, 3, 44, 2, 8, 61, 7, 30, 12, 1, 99]], np.int32)


def _random_norms(model: Transformer, seed: int = 1) -> None:
    """Non-zero norm scales, so the (1 + scale) convention is actually exercised."""
    rng = np.random.default_rng(seed)
    for _, var in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        v = var.get_value()
        if v.ndim == 1:
            var.set_value(jnp.asarray(rng.normal(0, 0.3, v.shape), v.dtype))


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    texts = ["make a video from this picture", "add some music", "把这张图做成视频"] * 20
    return Tokenizer.train(texts, vocab_size=300)


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory: pytest.TempPathFactory, tokenizer: Tokenizer) -> Path:
    cfg = ModelConfig.tiny(vocab_size=tokenizer.vocab_size, num_layers=3, layer_types=(
        "sliding_attention", "full_attention", "sliding_attention"), sliding_window=4)  # fmt: skip
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    _random_norms(model)
    d = tmp_path_factory.mktemp("hf") / "tiny"
    save_hf(model, d, tokenizer=tokenizer)
    return d


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True)
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def _rewrite_weights(d: Path, edit) -> None:  # type: ignore[no-untyped-def]
    w = SafetensorsDir(d)
    tensors = {k: np.array(w[k]) for k in w}
    del w
    edit(tensors)
    save_safetensors(tensors, d / "model.safetensors")


def _logits(model: Transformer, tokens: np.ndarray = TOKENS) -> np.ndarray:
    return np.asarray(model(jnp.asarray(tokens)))


def test_directory_layout_and_config(hf_dir: Path) -> None:
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= {
        p.name for p in hf_dir.iterdir()
    }
    hf = read_hf_config(hf_dir)
    assert hf["architectures"] == ["Gemma3ForCausalLM"] and hf["model_type"] == "gemma3_text"
    assert hf["layer_types"] == ["sliding_attention", "full_attention", "sliding_attention"]
    names = set(SafetensorsDir(hf_dir))
    assert "model.embed_tokens.weight" in names
    assert "model.layers.2.self_attn.q_norm.weight" in names
    w = SafetensorsDir(hf_dir)
    assert w.shape("model.layers.0.self_attn.k_proj.weight") == (16, 32)  # [out, in]


def test_load_round_trip_is_exact(hf_dir: Path, tmp_path: Path, tokenizer: Tokenizer) -> None:
    h = load_hf(hf_dir)
    assert h.tokenizer is not None and h.tokenizer.vocab_size == tokenizer.vocab_size
    assert h.config.is_local(0) and not h.config.is_local(1) and h.config.sliding_window == 4
    save_hf(h.model, tmp_path / "again", tokenizer=h.tokenizer, base_config=h.hf_config)
    again = load_hf(tmp_path / "again")
    a, b = SafetensorsDir(hf_dir), SafetensorsDir(tmp_path / "again")
    assert set(a) == set(b)
    for k in a:
        np.testing.assert_array_equal(np.asarray(a[k]), np.asarray(b[k]), err_msg=k)
    np.testing.assert_array_equal(_logits(h.model), _logits(again.model))


def test_bfloat16_load_and_save(hf_dir: Path, tmp_path: Path) -> None:
    f32 = load_hf(hf_dir, tokenizer=False)
    bf = load_hf(hf_dir, dtype="bfloat16", tokenizer=False)
    emb = bf.model.embed_tokens.embedding.get_value()
    assert emb.dtype == jnp.bfloat16 and bf.config.param_dtype == "bfloat16"
    ref, got = _logits(f32.model), _logits(bf.model)
    assert np.abs(ref - got).max() < 0.05 * np.abs(ref).max()
    save_hf(bf.model, tmp_path / "bf")
    w = SafetensorsDir(tmp_path / "bf")
    assert w.dtype("model.norm.weight").name == "bfloat16"
    assert json.loads((tmp_path / "bf" / "config.json").read_text())["torch_dtype"] == "bfloat16"
    np.testing.assert_array_equal(_logits(load_hf(tmp_path / "bf", dtype="bfloat16").model), got)


def test_sharded_index(hf_dir: Path, tmp_path: Path) -> None:
    d = tmp_path / "sharded"
    d.mkdir()
    w = SafetensorsDir(hf_dir)
    names = sorted(w)
    parts = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}  # fmt: skip
    weight_map = {}
    for fname, keys in parts.items():
        save_safetensors({k: np.array(w[k]) for k in keys}, d / fname)
        weight_map.update({k: fname for k in keys})
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (d / "config.json").write_bytes((hf_dir / "config.json").read_bytes())
    h = load_hf(d, tokenizer=False)
    np.testing.assert_array_equal(_logits(h.model), _logits(load_hf(hf_dir).model))


def test_unsupported_architecture(hf_dir: Path, tmp_path: Path) -> None:
    d = _copy(hf_dir, tmp_path / "llama")
    cfg = json.loads((d / "config.json").read_text())
    cfg["model_type"] = "llama"
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelLoadError, match="model_type 'llama' is not supported"):
        load_hf(d)


def test_missing_weight_is_named(hf_dir: Path, tmp_path: Path) -> None:
    d = _copy(hf_dir, tmp_path / "missing")
    _rewrite_weights(d, lambda t: t.pop("model.layers.1.mlp.up_proj.weight"))
    with pytest.raises(
        ModelLoadError, match=r"missing weight model\.layers\.1\.mlp\.up_proj\.weight"
    ):
        load_hf(d)


def test_unexpected_weight_is_named(hf_dir: Path, tmp_path: Path) -> None:
    d = _copy(hf_dir, tmp_path / "extra")
    _rewrite_weights(
        d, lambda t: t.update({"model.layers.0.self_attn.q_proj.bias": np.zeros(32, np.float32)})
    )
    with pytest.raises(ModelLoadError, match=r"unexpected weight.*q_proj\.bias"):
        load_hf(d)


def test_wrong_shape_names_both_shapes(hf_dir: Path, tmp_path: Path) -> None:
    d = _copy(hf_dir, tmp_path / "shape")
    _rewrite_weights(
        d,
        lambda t: t.update(
            {"model.layers.2.self_attn.o_proj.weight": np.zeros((32, 24), np.float32)}
        ),
    )
    with pytest.raises(
        ModelLoadError, match=r"o_proj\.weight has shape \[32, 24\], the config needs \[32, 32\]"
    ):
        load_hf(d)


def test_untied_head_refused_unless_equal(hf_dir: Path, tmp_path: Path) -> None:
    d = _copy(hf_dir, tmp_path / "head")
    _rewrite_weights(
        d, lambda t: t.update({"lm_head.weight": t["model.embed_tokens.weight"].copy()})
    )
    load_hf(d, tokenizer=False)  # a stored copy of the tied head is fine
    _rewrite_weights(d, lambda t: t.update({"lm_head.weight": t["lm_head.weight"] + 1}))
    with pytest.raises(ModelLoadError, match=r"lm_head\.weight differs"):
        load_hf(d, tokenizer=False)


def test_no_weights_and_no_config(hf_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match=r"no config\.json"):
        load_hf(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gemma3_text"}))
    with pytest.raises(ModelLoadError, match="missing required field 'num_hidden_layers'"):
        load_hf(tmp_path)
    (tmp_path / "config.json").write_bytes((hf_dir / "config.json").read_bytes())
    with pytest.raises(ModelLoadError, match=r"no \*\.safetensors"):
        load_hf(tmp_path)


def test_legacy_config_spelling() -> None:
    """A 4.x-style Gemma 3 270M config.json (rope_theta, rope_local_base_freq, pattern)."""
    hf = {
        "model_type": "gemma3_text", "vocab_size": 262144, "hidden_size": 640,
        "intermediate_size": 2048, "num_hidden_layers": 18, "num_attention_heads": 4,
        "num_key_value_heads": 1, "head_dim": 256, "query_pre_attn_scalar": 256,
        "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "rope_scaling": None,
        "sliding_window": 512, "_sliding_window_pattern": 6, "max_position_embeddings": 32768,
        "hidden_activation": "gelu_pytorch_tanh", "attn_logit_softcapping": None,
        "final_logit_softcapping": None, "rms_norm_eps": 1e-6,
    }  # fmt: skip
    cfg = to_model_config(hf)
    preset = ModelConfig.gemma3_270m()
    assert [cfg.is_local(i) for i in range(18)] == [preset.is_local(i) for i in range(18)]
    for f in ("d_model", "num_heads", "num_kv_heads", "head_dim", "d_ff", "sliding_window",
              "rope_theta", "rope_local_base_freq", "vocab_size"):  # fmt: skip
        assert getattr(cfg, f) == getattr(preset, f), f
    scaled = to_model_config({**hf, "rope_scaling": {"rope_type": "linear", "factor": 8.0}})
    assert scaled.rope_scaling_factor == 8.0
    with pytest.raises(ModelLoadError, match="RoPE type 'yarn'"):
        to_model_config({**hf, "rope_scaling": {"rope_type": "yarn", "factor": 8.0}})
    with pytest.raises(ModelLoadError, match="bidirectional"):
        to_model_config({**hf, "use_bidirectional_attention": True})


def test_router_tokens_extend_vocab(hf_dir: Path) -> None:
    from studio_align.catalog import default_catalog
    from studio_align.router.format import encode_plan, special_tokens

    h = load_hf(hf_dir)
    tok = h.tokenizer
    assert tok is not None
    n0 = tok.vocab_size
    before = _logits(h.model)
    ids = add_special_tokens(tok, special_tokens(default_catalog()))
    assert tok.vocab_size > n0 and max(ids) == tok.vocab_size - 1
    extend_vocab(h.model, tok.vocab_size)
    assert h.model.cfg.vocab_size == tok.vocab_size
    after = _logits(h.model)
    np.testing.assert_allclose(after[..., :n0], before, atol=1e-5)
    plan = encode_plan(tok, ["wan.image_to_video", "audio.music"])
    assert len(plan) == 3 and tok.decode(plan[:1]) == "<step:wan.image_to_video>"


def test_lora_is_merged_on_save(hf_dir: Path, tmp_path: Path) -> None:
    h = load_hf(hf_dir, lora=LoraConfig(rank=2, targets=("q_proj", "down_proj")))
    for _, var in nnx.to_flat_state(nnx.state(h.model, nnx.LoRAParam)):
        v = var.get_value()
        var.set_value(jnp.asarray(np.random.default_rng(0).normal(0, 0.2, v.shape), v.dtype))
    tuned = _logits(h.model)
    assert np.abs(tuned - _logits(load_hf(hf_dir).model)).max() > 1e-3
    save_hf(h.model, tmp_path / "merged", tokenizer=h.tokenizer, base_config=h.hf_config)
    names = set(SafetensorsDir(tmp_path / "merged"))
    assert not any("lora" in n for n in names)
    np.testing.assert_allclose(_logits(load_hf(tmp_path / "merged").model), tuned, atol=1e-5)


_MESH_SCRIPT = textwrap.dedent(
    """
    import sys, jax, numpy as np, jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    from studio_align.models.hf import load_hf
    from studio_align.models.sharding import MeshConfig, make_mesh
    assert jax.device_count() == 8, jax.devices()
    d = sys.argv[1]
    mc = MeshConfig(data=2, fsdp=4, min_shard_size=0)
    mesh = make_mesh(mc)
    h = load_hf(d, mesh=mesh, mesh_config=mc, tokenizer=False)
    ref = load_hf(d, tokenizer=False)
    emb = h.model.embed_tokens.embedding.get_value()
    assert isinstance(emb.sharding, NamedSharding) and emb.sharding.spec == P(None, "fsdp"), emb.sharding
    shard_shapes = {s.data.shape for s in emb.addressable_shards}
    assert shard_shapes == {(emb.shape[0], emb.shape[1] // 4)}, shard_shapes
    q = h.model.layers[0].self_attn.q_proj.kernel.get_value()
    assert q.sharding.spec == P("fsdp", None), q.sharding
    np.testing.assert_array_equal(np.asarray(q), np.asarray(ref.model.layers[0].self_attn.q_proj.kernel.get_value()))
    tokens = jnp.asarray(np.arange(16, dtype=np.int32).reshape(2, 8) % 50)
    a, b = np.asarray(jax.jit(lambda t: h.model(t))(tokens)), np.asarray(ref.model(tokens))
    assert np.abs(a - b).max() < 1e-5, np.abs(a - b).max()
    print("ok", emb.sharding.spec, len(emb.addressable_shards))
    """
)


@pytest.mark.slow  # over 10 s; the default suite stays under 15 minutes on 2 cores
def test_sharded_load_on_eight_cpu_devices(hf_dir: Path) -> None:
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
        "JAX_PLATFORMS": "cpu",
    }
    r = subprocess.run(
        [sys.executable, "-c", _MESH_SCRIPT, str(hf_dir)], env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("ok")


def test_single_device_arrays_are_committed(hf_dir: Path) -> None:
    h = load_hf(hf_dir, tokenizer=False)
    v = h.model.norm.scale.get_value()
    assert isinstance(v, jax.Array) and v.devices() == {jax.devices()[0]}


def test_multimodal_gemma3_checkpoint_loads_its_language_model(
    hf_dir: Path, tmp_path: Path
) -> None:
    """model_type gemma3: text_config nested, weights under model.language_model., vision skipped."""
    d = _copy(hf_dir, tmp_path / "mm")
    text = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(
        json.dumps({"model_type": "gemma3", "text_config": text, "vision_config": {}})
    )

    def rename(t: dict) -> None:  # type: ignore[type-arg]
        for k in list(t):
            t["model.language_model." + k.removeprefix("model.")] = t.pop(k)
        t["model.vision_tower.patch_embedding.weight"] = np.zeros((4, 4), np.float32)

    _rewrite_weights(d, rename)
    np.testing.assert_array_equal(_logits(load_hf(d).model), _logits(load_hf(hf_dir).model))


def test_cli_inspect_and_export(hf_dir: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from studio_align.cli import main
    from studio_align.models.bundle import save_model_bundle

    r = CliRunner().invoke(main, ["model", "inspect-hf", str(hf_dir), "--json"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.stdout)
    assert info["layers"] == 3 and info["local_layers"] == 2 and info["sliding_window"] == 4

    h = load_hf(hf_dir, lora=LoraConfig(rank=2, targets=("v_proj",)))
    lora_b = h.model.layers[0].self_attn.v_proj.lora_b
    assert lora_b is not None
    lora_b.set_value(jnp.full(lora_b.get_value().shape, 0.1, jnp.float32))
    save_model_bundle(tmp_path / "bundle", h.model, h.tokenizer)
    (tmp_path / "bundle" / "router.json").write_text("{}")
    out = tmp_path / "exported"
    r = CliRunner().invoke(
        main,
        ["model", "export-hf", "--checkpoint", str(tmp_path / "bundle"), "--out", str(out),
         "--base", str(hf_dir), "--json"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert {"config.json", "model.safetensors", "tokenizer.json", "router.json"} <= set(
        json.loads(r.stdout)["files"]
    )
    np.testing.assert_allclose(_logits(load_hf(out).model), _logits(h.model), atol=1e-5)
    bad = CliRunner().invoke(main, ["model", "inspect-hf", str(tmp_path)])
    assert bad.exit_code == 2 and "config.json" in bad.output
