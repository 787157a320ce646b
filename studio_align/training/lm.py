"""Building the engine's decoder LM from a run's `[model]` section.

Any task whose model is the engine's `Transformer` (the router, a captioner, a tagger)
starts here: a preset sized to its tokenizer, a saved bundle to continue, or a local
Hugging Face Gemma 3 base. Tasks decide the tokenizer; this module only builds weights.
"""

from __future__ import annotations

from typing import Any, cast

from flax import nnx

from studio_align.errors import ConfigError
from studio_align.models.bundle import load_model_bundle
from studio_align.models.config import LoraConfig, ModelConfig
from studio_align.models.hf import extend_vocab, init_token_rows, load_hf
from studio_align.models.lora import add_lora
from studio_align.models.tokenizer import Tokenizer
from studio_align.models.transformer import Transformer
from studio_align.training.run import ModelSection


def lora_config(section: ModelSection) -> LoraConfig | None:
    return LoraConfig.model_validate(section.lora) if section.lora is not None else None


def build_model(
    section: ModelSection,
    vocab_size: int,
    *,
    seed: int,
    tokenizer: Any | None = None,
    lora: bool = True,
) -> nnx.Module:
    """The model `[model]` describes: from a HF base, a bundle, or a preset sized to `vocab_size`.

    With `model.base`, `tokenizer` is the base tokenizer plus added tokens: their new
    embedding rows start from their descriptions (`models.hf.init_token_rows`).
    `lora=False` builds without adapters (a frozen reference).
    """
    lcfg = lora_config(section) if lora else None
    if section.base is not None:
        if section.init_from is not None or section.config:
            raise ConfigError("model.base: do not combine with model.init_from or model.config")
        model = load_hf(section.base, dtype=section.base_dtype, tokenizer=False).model
        vocab_size = max(vocab_size, model.cfg.vocab_size)  # the tokenizer may use fewer rows
        extend_vocab(model, vocab_size)  # rows for tokens added to the base tokenizer
        if tokenizer is not None and (section.base / "tokenizer.json").exists():
            added = range(Tokenizer.load(section.base).vocab_size, tokenizer.vocab_size)
            init_token_rows(model, tokenizer, list(added))
        if lcfg is not None:
            add_lora(model, lcfg, rngs=nnx.Rngs(seed))
        return model
    if section.init_from is not None:
        model = cast(Transformer, load_model_bundle(section.init_from).model)
        reads = getattr(model.cfg, "input_vocab_size", model.cfg.vocab_size)  # encoder models
        if reads != vocab_size:
            raise ConfigError(f"model.init_from: vocab_size {reads} != tokenizer's {vocab_size}")
        if lcfg is not None and model.cfg.lora is None:
            add_lora(model, lcfg, rngs=nnx.Rngs(seed))
        return model
    fields = {**section.config, "vocab_size": vocab_size, "lora": lcfg}
    try:
        if section.preset == "none":
            cfg = ModelConfig.model_validate(fields)
        else:
            cfg = getattr(ModelConfig, section.preset)(**fields)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"model.config: {e}") from None
    return Transformer(cfg, rngs=nnx.Rngs(seed))


def trainable_filter(model: nnx.Module, section: ModelSection) -> Any:
    """`nnx.LoRAParam` when `[model] lora` asks for adapters only, else every `nnx.Param`."""
    has_lora = getattr(cast(Any, model).cfg, "lora", None) is not None
    return nnx.LoRAParam if has_lora and section.lora is not None else nnx.Param
