"""A Hugging Face base in the router path: exported routers load, and preference tuning
starts straight from `model.base`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from flax import nnx
from serving_helpers import make_router_checkpoint

from studio_align.catalog import default_catalog
from studio_align.data.compile import compile_logs
from studio_align.models.config import ModelConfig
from studio_align.models.hf import export_hf, save_hf
from studio_align.models.tokenizer import Tokenizer
from studio_align.models.transformer import Transformer
from studio_align.router.format import normalize_text
from studio_align.router.router import Router
from studio_align.simulate.router.requests import generate_examples
from studio_align.training.dpo import DPORunConfig, train_dpo

REQUESTS = [e["request"] for e in generate_examples(24, seed=5)]


def test_router_loads_from_its_hugging_face_export(tmp_path: Path) -> None:
    ck = make_router_checkpoint(tmp_path / "router", seed=3, version="r1")
    exported = export_hf(ck, tmp_path / "hf")
    assert (exported / "config.json").exists() and (exported / "router.json").exists()
    a, b = Router.load(ck), Router.load(exported)
    plans_a, conf_a = a.route(REQUESTS)
    plans_b, conf_b = b.route(REQUESTS)
    assert plans_a == plans_b
    np.testing.assert_allclose(conf_a, conf_b, rtol=1e-4, atol=1e-6)


def _route_log(path: Path) -> Path:
    lines = []
    for i in range(12):
        lines.append(
            {
                "type": "route",
                "id": f"e{i}",
                "ts": "2026-11-01T10:00:00Z",
                "creator": f"c{i % 3}",
                "session": f"s{i}",
                "request": {"text": "animate this photo", "attachments": ["image"]},
                "proposed": ["wan.image_to_video"],
                "final": ["wan.image_to_video", "audio.music"],
                "outcome": "rerouted",
            }
        )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


@pytest.mark.slow  # over 10 s; the default suite stays under 15 minutes on 2 cores
def test_dpo_starts_from_a_hugging_face_base(tmp_path: Path) -> None:
    texts = [normalize_text(e["request"]["text"]) for e in generate_examples(300, seed=3)]
    tok = Tokenizer.train(texts, vocab_size=400)
    base = Transformer(ModelConfig.tiny(tok.vocab_size, d_model=48), rngs=nnx.Rngs(0))
    base_dir = save_hf(base, tmp_path / "base", tokenizer=tok)
    compiled = tmp_path / "compiled"
    compile_logs([_route_log(tmp_path / "log.jsonl")], compiled, heldout_fraction=0.0)
    cfg = DPORunConfig.model_validate(
        {
            "run_dir": str(tmp_path / "run"),
            "model": {"base": str(base_dir), "lora": {"rank": 4, "alpha": 8.0}},
            "data": {"dir": str(compiled)},
            "train": {"steps": 3, "batch_size": 4, "progress": False},
        }
    )
    res = train_dpo(cfg)
    router = Router.load(res.checkpoint)
    assert router.tokenizer.vocab_size > tok.vocab_size  # the router's tokens were added
    plans, _ = router.route(REQUESTS[:4])
    cat = default_catalog()
    assert all(cat.is_valid(p, r["attachments"]) for p, r in zip(plans, REQUESTS, strict=False))
