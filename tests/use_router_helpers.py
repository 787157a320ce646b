"""A tiny untrained router on the shipped pretrained encoder (USE), for the tests of what
routing does around the model (the plan prior, windows of sentences)."""

from __future__ import annotations

from flax import nnx

from studio_align.catalog import default_catalog
from studio_align.models.conditioned import ConditionedConfig, EncoderConditionedLM
from studio_align.models.config import ModelConfig
from studio_align.models.encoders.use import load_use
from studio_align.models.encoders.use_tokenizer import use_tokenizer
from studio_align.router.format import BOS, EOS, PAD, UNK, special_tokens
from studio_align.router.router import Router


def tiny_use_router() -> Router:
    """A router of `ModelConfig.tiny` conditioned on USE, random weights, three steps at most."""
    cat = default_catalog()
    specials = special_tokens(cat)
    tok = use_tokenizer(specials, roles={"pad": PAD, "bos": BOS, "eos": EOS, "unk": UNK})
    cfg = ConditionedConfig(
        decoder=ModelConfig.tiny(vocab_size=len(specials)), text_start_id=tok.bos_id
    )
    model = EncoderConditionedLM(cfg, rngs=nnx.Rngs(0), encoder=load_use())
    return Router(model, tok, cat, max_steps=3)
