"""`eval router` on a saved (tiny, untrained) router checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from flax import nnx

from studio_align.catalog import default_catalog
from studio_align.cli import main
from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer
from studio_align.router import eval as packaged
from studio_align.router.checkpoint import save_router
from studio_align.router.data import write_jsonl
from studio_align.router.format import build_tokenizer
from studio_align.simulate.router.requests import generate_examples

HANDWRITTEN = packaged.path("handwritten_v1")


def _checkpoint(tmp_path: Path) -> Path:
    cat = default_catalog()
    ex = generate_examples(200, seed=1)
    tok = build_tokenizer([e["request"]["text"] for e in ex], cat, vocab_size=600)
    model = Transformer(ModelConfig.tiny(vocab_size=640), rngs=nnx.Rngs(0))
    return save_router(tmp_path / "router", model, tok, cat, max_steps=3)


def test_eval_router_json_and_report(tmp_path: Path) -> None:
    ckpt = _checkpoint(tmp_path)
    res = CliRunner().invoke(
        main,
        ["eval", "router", "--checkpoint", str(ckpt), "--data", str(HANDWRITTEN), "--json",
         "--report", str(tmp_path / "rep")],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    fig = json.loads(res.stdout)
    assert 0.0 <= fig["exact_plan_accuracy"] <= 1.0
    assert fig["validity_rate"] == 1.0  # constrained decoding, even untrained
    assert fig["n"] >= 40 and set(fig["by_language"]) == {"en", "zh"}
    assert (tmp_path / "rep" / "index.html").exists()
    assert (tmp_path / "rep" / "reliability.png").stat().st_size > 0


def test_eval_router_text_output_and_bad_input(tmp_path: Path) -> None:
    ckpt = _checkpoint(tmp_path)
    data = write_jsonl(tmp_path / "d.jsonl", generate_examples(10, seed=2))
    res = CliRunner().invoke(
        main, ["eval", "router", "--checkpoint", str(ckpt), "--data", str(data)]
    )
    assert res.exit_code == 0, res.output
    assert "exact-plan accuracy" in res.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"request": {"text": "x"}}\n', encoding="utf-8")
    res = CliRunner().invoke(
        main, ["eval", "router", "--checkpoint", str(ckpt), "--data", str(bad)]
    )
    assert res.exit_code == 2 and "bad.jsonl:1" in res.output
    res = CliRunner().invoke(
        main, ["eval", "router", "--checkpoint", str(tmp_path), "--data", str(data)]
    )
    assert res.exit_code == 2 and "router" in res.output
