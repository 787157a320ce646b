"""Tuning a Hugging Face base: `model.base` in the SFT config, LoRA, router tokens, export.

The base is a small engine model written in the HF layout with a tokenizer that knows
nothing of the router (no `<plan>`, `<att:*>`, `<step:*>`): exactly the situation of a
downloaded Gemma 3 / FunctionGemma directory, at test size.
"""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from studio_align.config import validate
from studio_align.models.config import ModelConfig
from studio_align.models.hf import describe_token, load_hf, save_hf
from studio_align.models.safetensors_io import SafetensorsDir
from studio_align.models.tokenizer import Tokenizer
from studio_align.models.transformer import Transformer
from studio_align.router.data import write_jsonl
from studio_align.router.format import normalize_text
from studio_align.simulate.router.requests import generate_examples


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    texts = [normalize_text(ex["request"]["text"]) for ex in generate_examples(400, seed=3)]
    tok = Tokenizer.train(texts, vocab_size=400)
    model = Transformer(ModelConfig.tiny(tok.vocab_size, d_model=48), rngs=nnx.Rngs(0))
    d = tmp_path_factory.mktemp("base") / "gemma-like"
    save_hf(model, d, tokenizer=tok)
    return d


def test_describe_token() -> None:
    assert describe_token("<step:wan.image_to_video>") == "wan image to video"
    assert describe_token("<att:audio>") == "audio" and describe_token("<plan>") == "plan"


@pytest.mark.slow  # ~30 s of CPU: 60 LoRA steps
def test_sft_from_hf_base_with_lora_then_export(base_dir: Path, tmp_path: Path) -> None:
    from studio_align.router.router import Router
    from studio_align.training.sft import SFTConfig, train_sft

    train = write_jsonl(tmp_path / "train.jsonl", generate_examples(256, seed=0))
    held = write_jsonl(tmp_path / "held.jsonl", generate_examples(64, seed=1, split="heldout"))
    cfg = validate(
        SFTConfig,
        {
            "run_dir": str(tmp_path / "run"),
            "model": {
                "base": str(base_dir),
                "lora": {
                    "rank": 8,
                    "alpha": 16.0,
                    "targets": ["q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                },
            },
            "data": {"train": str(train), "heldout": str(held)},
            "train": {
                "steps": 60,
                "batch_size": 16,
                "log_every": 10,
                "progress": False,
                "metrics_hook": False,
            },
            "optim": {"learning_rate": 3e-2, "warmup_steps": 2},
            "checkpoint": {"every": 0},
        },
    )
    res = train_sft(cfg)
    first, last = res.train.history[0]["loss"], res.metrics["loss"]
    assert last < 0.6 * first, (first, last)

    router = Router.load(res.checkpoint)
    base_vocab = Tokenizer.load(base_dir).vocab_size
    assert router.tokenizer.vocab_size > base_vocab  # router tokens were added
    assert router.model.cfg.vocab_size == router.tokenizer.vocab_size
    plans, confs = router.route([{"text": "turn this photo into a clip", "attachments": ["image"]}])
    assert len(plans) == 1 and 0 < confs[0] <= 1

    # LoRA trained the adapters only: the base kernels are the downloaded ones
    base = SafetensorsDir(base_dir)
    q = np.asarray(router.model.layers[1].self_attn.q_proj.kernel.get_value())
    np.testing.assert_array_equal(q, np.asarray(base["model.layers.1.self_attn.q_proj.weight"]).T)

    # export: merged HF directory with the extended tokenizer; logits unchanged
    out = save_hf(router.model, tmp_path / "export", tokenizer=router.tokenizer, source=base_dir)
    again = load_hf(out)
    assert again.tokenizer is not None and again.tokenizer.token_to_id("<plan>") is not None
    tokens = jnp.asarray([router.tokenizer.encode("<bos>make a video<plan>")], jnp.int32)
    np.testing.assert_allclose(
        np.asarray(again.model(tokens)), np.asarray(router.model(tokens)), atol=2e-5
    )


def test_base_with_init_from_is_refused(base_dir: Path) -> None:
    from studio_align.errors import ConfigError
    from studio_align.training.lm import build_model
    from studio_align.training.run import ModelSection

    section = ModelSection(base=base_dir, init_from=base_dir)
    with pytest.raises(ConfigError, match=r"model\.base"):
        build_model(section, 400, seed=0)
