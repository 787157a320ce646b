"""Translate a Hugging Face Gemma 3 `config.json` to `ModelConfig` and back.

Reads both spellings transformers has used:

- legacy (4.x, what Gemma 3 270M / FunctionGemma 270M ship with): `rope_theta`,
  `rope_local_base_freq`, `rope_scaling` (`null` or `{"rope_type": "linear", "factor": 8}`),
  `sliding_window_pattern` / `_sliding_window_pattern`, optional `layer_types`;
- current (5.x): `rope_parameters = {"full_attention": {...}, "sliding_attention": {...}}`
  and explicit `layer_types`.

A multimodal `gemma3` config contributes its `text_config` (the language model alone is
loaded). Writing produces a `gemma3_text` / `Gemma3ForCausalLM` config carrying *both*
spellings, so old and new transformers (and vLLM, Tunix) read the same numbers.

Everything that the engine cannot reproduce exactly is refused with `ModelLoadError`
rather than approximated: another architecture, bidirectional attention (EmbeddingGemma),
attention biases, an activation other than tanh-GELU, RoPE types other than
default/linear, an untied output head.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from studio_align.errors import ModelLoadError
from studio_align.models.config import ModelConfig
from studio_align.textfiles import read_json_object

SUPPORTED_MODEL_TYPES = ("gemma3_text", "gemma3")
_ACTIVATIONS = ("gelu_pytorch_tanh", "gelu_tanh", "gelu_new", "gelu_fast")


def read_hf_config(directory: str | Path) -> dict[str, Any]:
    """The text model's config dict from `directory/config.json` (checked model_type)."""
    f = Path(directory) / "config.json"
    if not f.exists():
        raise ModelLoadError(f"{directory}: no config.json (not a Hugging Face model directory)")
    raw = read_json_object(f, ModelLoadError)
    model_type = raw.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ModelLoadError(
            f"{f}: model_type {model_type!r} is not supported; the engine loads Gemma 3 text "
            f"models ({', '.join(SUPPORTED_MODEL_TYPES)})"
        )
    if model_type == "gemma3":
        text = raw.get("text_config")
        if not isinstance(text, dict):
            raise ModelLoadError(f"{f}: gemma3 config without a text_config")
        text = {**text, "model_type": "gemma3_text"}
        text.setdefault("tie_word_embeddings", raw.get("tie_word_embeddings", True))
        return text
    return raw


def _rope(hf: dict[str, Any], where: str) -> tuple[float, float, float]:
    """(global theta, local theta, global linear scaling factor)."""
    params = hf.get("rope_parameters")
    if isinstance(params, dict) and ("full_attention" in params or "sliding_attention" in params):
        full = params.get("full_attention") or {}
        local = params.get("sliding_attention") or {}
    else:
        full = dict(hf.get("rope_scaling") or {})
        full.setdefault("rope_theta", hf.get("rope_theta", 1_000_000.0))
        local = {"rope_type": "default", "rope_theta": hf.get("rope_local_base_freq", 10_000.0)}
    factor = 1.0
    kind = full.get("rope_type", full.get("type", "default"))
    if kind == "linear":
        factor = float(full.get("factor", 1.0))
    elif kind != "default":
        raise ModelLoadError(f"{where}: RoPE type {kind!r} on global layers is not supported")
    lkind = local.get("rope_type", local.get("type", "default"))
    if lkind not in ("default",) and not (lkind == "linear" and float(local.get("factor", 1)) == 1):
        raise ModelLoadError(f"{where}: RoPE type {lkind!r} on sliding layers is not supported")
    return (
        float(full.get("rope_theta", 1_000_000.0)),
        float(local.get("rope_theta", 10_000.0)),
        factor,
    )


def _layer_types(hf: dict[str, Any], n: int, where: str) -> tuple[str, ...]:
    types = hf.get("layer_types")
    if types is None:
        pattern = int(hf.get("sliding_window_pattern", hf.get("_sliding_window_pattern", 6)))
        return tuple(
            "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n)
        )
    bad = sorted({t for t in types if t not in ("sliding_attention", "full_attention")})
    if bad or len(types) != n:
        raise ModelLoadError(
            f"{where}: layer_types must list {n} entries of sliding_attention/full_attention, "
            f"got {len(types)} (unknown: {bad})"
        )
    return tuple(types)


def to_model_config(
    hf: dict[str, Any],
    *,
    dtype: str = "float32",
    param_dtype: str | None = None,
    where: str = "config.json",
) -> ModelConfig:
    """`ModelConfig` equivalent to a Gemma 3 text config (see the module docstring)."""
    try:
        return _to_model_config(hf, dtype=dtype, param_dtype=param_dtype, where=where)
    except (TypeError, ValueError) as e:  # a field of the wrong type ("big", null) or value
        raise ModelLoadError(f"{where}: invalid value ({e})") from None


def _to_model_config(
    hf: dict[str, Any], *, dtype: str, param_dtype: str | None, where: str
) -> ModelConfig:
    if hf.get("model_type", "gemma3_text") != "gemma3_text":
        raise ModelLoadError(f"{where}: model_type {hf.get('model_type')!r} is not gemma3_text")
    if hf.get("use_bidirectional_attention"):
        raise ModelLoadError(f"{where}: bidirectional attention (EmbeddingGemma) is not supported")
    if hf.get("attention_bias"):
        raise ModelLoadError(f"{where}: attention_bias = true is not supported")
    act = hf.get("hidden_activation") or hf.get("hidden_act") or "gelu_pytorch_tanh"
    if act not in _ACTIVATIONS:
        raise ModelLoadError(
            f"{where}: hidden_activation {act!r} is not supported (the engine uses tanh-GELU)"
        )
    if hf.get("tie_word_embeddings", True) is False:
        raise ModelLoadError(f"{where}: tie_word_embeddings = false is not supported")
    try:
        n = int(hf["num_hidden_layers"])
        d = int(hf["hidden_size"])
        heads = int(hf["num_attention_heads"])
        fields: dict[str, Any] = dict(
            vocab_size=int(hf["vocab_size"]),
            d_model=d,
            num_layers=n,
            num_heads=heads,
            num_kv_heads=int(hf.get("num_key_value_heads", heads)),
            head_dim=int(hf.get("head_dim") or d // heads),
            d_ff=int(hf["intermediate_size"]),
        )
    except KeyError as e:
        raise ModelLoadError(f"{where}: missing required field {e.args[0]!r}") from None
    except ZeroDivisionError:
        raise ModelLoadError(f"{where}: num_attention_heads must be positive") from None
    small = next((k for k, v in fields.items() if v < 1), None)
    if small is not None:
        raise ModelLoadError(f"{where}: {small} is {fields[small]}; it must be positive")
    theta, local_theta, factor = _rope(hf, where)
    max_len = int(hf.get("max_position_embeddings", 32_768))
    window = hf.get("sliding_window")
    fields.update(
        query_pre_attn_scalar=hf.get("query_pre_attn_scalar"),
        rope_theta=theta,
        rope_local_base_freq=local_theta,
        rope_scaling_factor=factor,
        # no window but sliding layers: they still use the local RoPE base in HF; a window
        # as long as the context keeps that and masks nothing
        sliding_window=int(window) if window is not None else max_len,
        layer_types=_layer_types(hf, n, where),
        # transformers' Gemma3Attention stores attn_logit_softcapping but never applies it
        # (Gemma 3 was trained without it); the reference implementation is what we match
        attn_logit_softcapping=None,
        final_logit_softcapping=hf.get("final_logit_softcapping"),
        rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
        max_seq_len=max_len,
        dtype=dtype,
        param_dtype=param_dtype or dtype,
    )
    try:
        return ModelConfig(**fields)
    except ValueError as e:
        raise ModelLoadError(f"{where}: {e}") from None


def to_hf_config(
    cfg: ModelConfig, base: dict[str, Any] | None = None, *, torch_dtype: str = "float32"
) -> dict[str, Any]:
    """A `Gemma3ForCausalLM` config.json dict for `cfg` (keeping `base`'s other keys)."""
    if cfg.attn_logit_softcapping is not None:
        raise ModelLoadError(
            "attn_logit_softcapping is set, but transformers' Gemma 3 does not apply it: "
            "a saved model would compute different logits"
        )
    out = dict(base or {})
    for stale in (
        "text_config",
        "vision_config",
        "auto_map",
        "rope_scaling",
        "quantization_config",
    ):
        out.pop(stale, None)
    layer_types = [
        "sliding_attention" if cfg.is_local(i) else "full_attention" for i in range(cfg.num_layers)
    ]
    full: dict[str, Any] = {"rope_type": "default", "rope_theta": cfg.rope_theta}
    if cfg.rope_scaling_factor != 1.0:
        full = {"rope_type": "linear", "rope_theta": cfg.rope_theta}
        full["factor"] = cfg.rope_scaling_factor
    out.update(
        architectures=["Gemma3ForCausalLM"],
        model_type="gemma3_text",
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.d_model,
        intermediate_size=cfg.d_ff,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        head_dim=cfg.head_dim,
        hidden_activation="gelu_pytorch_tanh",
        query_pre_attn_scalar=_int_if_whole(cfg.query_pre_attn_scalar or cfg.head_dim),
        sliding_window=cfg.sliding_window or cfg.max_seq_len,
        layer_types=layer_types,
        final_logit_softcapping=cfg.final_logit_softcapping,
        rms_norm_eps=cfg.rms_norm_eps,
        max_position_embeddings=cfg.max_seq_len,
        tie_word_embeddings=True,
        attention_bias=False,
        use_bidirectional_attention=False,
        # both spellings: transformers 5 reads rope_parameters, 4.x the flat keys
        rope_parameters={
            "full_attention": full,
            "sliding_attention": {"rope_type": "default", "rope_theta": cfg.rope_local_base_freq},
        },
        rope_theta=cfg.rope_theta,
        rope_local_base_freq=cfg.rope_local_base_freq,
        torch_dtype=torch_dtype,
        dtype=torch_dtype,
    )
    if cfg.rope_scaling_factor != 1.0:
        out["rope_scaling"] = {"rope_type": "linear", "factor": cfg.rope_scaling_factor}
    return out


def _int_if_whole(x: float) -> int | float:
    """transformers types `query_pre_attn_scalar` as int; keep a fraction as given."""
    return int(x) if float(x).is_integer() else x
