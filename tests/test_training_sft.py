"""SFT: loss on completion tokens only, a tiny run that learns, bundles that round-trip."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from studio_align.config import validate
from studio_align.models.bundle import load_model_bundle, save_model_bundle
from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer
from studio_align.training.batches import ArrayBatches
from studio_align.training.loop import TrainRunConfig, train_loop
from studio_align.training.sft import encode_pairs, make_eval_fn, padded_length, sft_loss
from studio_align.training.supervised import supervised

V = 32
PAD, EOS = 0, 1


def _pairs(n: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """Prompt: random tokens of random length; completion: a fixed function of the last one."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        prompt = rng.integers(2, V, size=rng.integers(3, 7)).tolist()
        out.append((prompt, [2 + (prompt[-1] * 7) % (V - 2), EOS]))
    return out


def _model(seed: int = 0) -> Transformer:
    return Transformer(ModelConfig.tiny(V), rngs=nnx.Rngs(seed))


def test_encode_pairs_masks_exactly_the_completion() -> None:
    arrays = encode_pairs([([5, 6, 7], [8, 1]), ([9], [1])], max_len=6, pad_id=PAD)
    np.testing.assert_array_equal(arrays["tokens"], [[5, 6, 7, 8, 1, 0], [9, 1, 0, 0, 0, 0]])
    np.testing.assert_array_equal(arrays["loss"], [[0, 0, 0, 1, 1, 0], [0, 1, 0, 0, 0, 0]])
    np.testing.assert_array_equal(arrays["attn"].sum(1), [5, 2])
    assert padded_length([([1] * 9, [2])]) == 16


def test_loss_counts_completion_tokens_only() -> None:
    model = _model()
    pairs = _pairs(4)
    arrays = encode_pairs(pairs, padded_length(pairs) + 8, PAD)
    batch = {k: jnp.asarray(v) for k, v in arrays.items()}
    loss_fn = nnx.jit(sft_loss)
    loss, metrics = loss_fn(model, batch)
    # independent computation: log-softmax of full logits, completion positions only
    logits = np.asarray(
        nnx.jit(lambda m, t, a: m(t, None, a))(model, batch["tokens"], batch["attn"]),
        np.float64,
    )
    logp = (
        logits
        - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True))
        - logits.max(-1, keepdims=True)
    )
    nll, count = 0.0, 0
    for b, (prompt, completion) in enumerate(pairs):
        for j in range(len(prompt), len(prompt) + len(completion)):
            nll -= logp[b, j - 1, arrays["tokens"][b, j]]
            count += 1
    assert float(metrics["weight"]) == count == 8
    assert float(loss) == pytest.approx(nll / count, rel=1e-5)
    # changing a padding token leaves the loss unchanged; changing a completion token does not
    t = arrays["tokens"].copy()
    t[0, -1] = 7
    same, _ = loss_fn(model, {**batch, "tokens": jnp.asarray(t)})
    assert float(same) == pytest.approx(float(loss), rel=1e-6)
    t = arrays["tokens"].copy()
    t[0, len(pairs[0][0])] = (t[0, len(pairs[0][0])] + 1) % V
    assert abs(float(loss_fn(model, {**batch, "tokens": jnp.asarray(t)})[0]) - float(loss)) > 1e-4
    # the gradient ignores prompt targets: zeroing the loss mask zeroes the gradient
    zero = {**batch, "loss": jnp.zeros_like(batch["loss"])}
    g = nnx.jit(nnx.grad(lambda m, b: sft_loss(m, b)[0]))(model, zero)
    assert all(float(jnp.abs(x).max()) == 0.0 for x in jax.tree.leaves(g))


def test_tiny_sft_run_lowers_the_loss(tmp_path: Path) -> None:
    train, held = _pairs(256, seed=0), _pairs(64, seed=1)
    max_len = padded_length(train + held)
    cfg = validate(
        TrainRunConfig,
        {
            "run_dir": str(tmp_path),
            "train": {
                "steps": 40,
                "batch_size": 32,
                "grad_accum": 2,
                "log_every": 10,
                "progress": False,
                "metrics_hook": False,
            },
            "optim": {"learning_rate": 3e-3, "warmup_steps": 5},
            "checkpoint": {"every": 0},
        },
    )
    model = _model()
    eval_fn = make_eval_fn(encode_pairs(held, max_len, PAD), batch_size=48)
    before = eval_fn(model)
    res = train_loop(
        model,
        cfg,
        supervised(sft_loss, ArrayBatches(encode_pairs(train, max_len, PAD), 32)),
        eval_fn=eval_fn,
        name="sft",
    )
    assert res.compiles == 1
    first, last = res.history[0]["loss"], res.metrics["loss"]
    assert last < 0.6 * first, (first, last)
    assert res.eval_metrics["loss"] < 0.6 * before["loss"]
    assert res.eval_metrics["token_acc"] > before["token_acc"] + 0.2


def test_bundle_round_trip(tmp_path: Path) -> None:
    from studio_align.errors import CheckpointError
    from studio_align.models.config import LoraConfig

    model = Transformer(ModelConfig.tiny(V, lora=LoraConfig(rank=2)), rngs=nnx.Rngs(3))
    save_model_bundle(tmp_path / "b", model, None, {"note": "x"})
    b = load_model_bundle(tmp_path / "b")
    tokens = jnp.asarray(np.arange(12)[None] % V)
    fwd = nnx.jit(lambda m, t: m(t))
    np.testing.assert_array_equal(np.asarray(fwd(model, tokens)), np.asarray(fwd(b.model, tokens)))
    assert b.extra == {"note": "x"} and b.config == model.cfg and b.tokenizer is None
    # a bundle whose weights do not fit its config is refused, naming the tensor
    cfg_path = tmp_path / "b" / "model_config.json"
    cfg_path.write_text(cfg_path.read_text().replace('"d_ff": 64', '"d_ff": 96'))
    with pytest.raises(CheckpointError, match=r"down_proj\.kernel"):
        load_model_bundle(tmp_path / "b")


def _write_demo(tmp_path: Path) -> tuple[Path, Path]:
    from studio_align.router.data import write_jsonl
    from studio_align.simulate.router.requests import generate_examples

    train = write_jsonl(tmp_path / "train.jsonl", generate_examples(96, seed=0))
    held = write_jsonl(tmp_path / "heldout.jsonl", generate_examples(32, seed=1, split="heldout"))
    return train, held


def _toml(tmp_path: Path, train: Path, held: Path) -> Path:
    cfg = tmp_path / "run.toml"
    cfg.write_text(
        f"""
run_dir = "{tmp_path / "run"}"

[model]
preset = "tiny"
vocab_size = 300

[data]
train = "{train}"
heldout = "{held}"

[train]
steps = 30
batch_size = 16
log_every = 10
progress = false

[optim]
learning_rate = 3e-3
warmup_steps = 3

[checkpoint]
every = 15
keep = 1
""",
        encoding="utf-8",
    )
    return cfg


@pytest.mark.slow  # ~20 s on a busy 2-core VM; test_tiny_sft_run_lowers_the_loss keeps SFT in the default run
def test_train_sft_on_routing_examples_writes_a_router_checkpoint(tmp_path: Path) -> None:
    from studio_align.config import load_config
    from studio_align.router.router import Router
    from studio_align.training.sft import SFTConfig, train_sft

    train, held = _write_demo(tmp_path)
    cfg = load_config(SFTConfig, _toml(tmp_path, train, held))
    res = train_sft(cfg)
    assert res.train.history[0]["loss"] > 1.5 * res.metrics["loss"]
    assert 0.0 <= res.eval_metrics["exact"] <= 1.0 and res.eval_metrics["loss"] > 0
    names = {p.name for p in res.checkpoint.iterdir()}
    assert {
        "bundle.json",
        "model_config.json",
        "params.safetensors",
        "tokenizer.json",
        "router.json",
    } <= names
    assert (res.run_dir / "config.toml").exists() and (res.run_dir / "metrics.jsonl").exists()
    router = Router.load(res.checkpoint)  # what eval and serve do
    assert router.model.cfg == load_model_bundle(res.checkpoint).config


@pytest.mark.slow  # over 10 s; the default suite stays under 15 minutes on 2 cores
def test_train_sft_cli(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from studio_align.cli import main

    train, held = _write_demo(tmp_path)
    cfg = _toml(tmp_path, train, held)
    r = CliRunner().invoke(
        main, ["train", "sft", "--config", str(cfg), "--set", "train.steps=4", "--json"]
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["steps"] == 4 and Path(out["checkpoint"]).is_dir()
    bad = CliRunner().invoke(main, ["train", "sft", "--config", str(cfg), "--set", "optim.lr=1"])
    assert bad.exit_code == 2 and "optim.lr" in bad.output


def test_lora_training_updates_adapters_only(tmp_path: Path) -> None:
    from studio_align.models.config import LoraConfig

    model = Transformer(ModelConfig.tiny(V, lora=LoraConfig(rank=4)), rngs=nnx.Rngs(0))
    base = jax.tree.map(np.array, nnx.state(model, nnx.Not(nnx.LoRAParam)))
    lora = jax.tree.map(np.array, nnx.state(model, nnx.LoRAParam))
    pairs = _pairs(64)
    cfg = validate(
        TrainRunConfig,
        {
            "run_dir": str(tmp_path),
            "train": {"steps": 5, "batch_size": 16, "progress": False, "metrics_hook": False},
            "optim": {"learning_rate": 1e-2},
            "checkpoint": {"every": 0},
        },
    )
    arrays = encode_pairs(pairs, padded_length(pairs), PAD)
    train_loop(model, cfg, supervised(sft_loss, ArrayBatches(arrays, 16)), wrt=nnx.LoRAParam)
    for a, b in zip(
        jax.tree.leaves(base),
        jax.tree.leaves(nnx.state(model, nnx.Not(nnx.LoRAParam))),
        strict=True,
    ):
        np.testing.assert_array_equal(a, np.asarray(b))
    changed = [
        float(np.abs(a - np.asarray(b)).max())
        for a, b in zip(
            jax.tree.leaves(lora), jax.tree.leaves(nnx.state(model, nnx.LoRAParam)), strict=True
        )
    ]
    assert min(changed) > 0


def test_trimmed_batches_keep_rows_and_loss() -> None:
    """Cutting a batch's padding columns changes neither its rows nor its loss."""
    from studio_align.training.batches import TrimmedBatches

    pairs = _pairs(64)
    arrays = encode_pairs(pairs, 48, PAD)  # far longer than any example (at most 8 tokens)
    full = ArrayBatches(arrays, 16, seed=3)
    cut = TrimmedBatches(full, 8)
    assert cut.steps_per_epoch == full.steps_per_epoch
    model = _model()
    loss_fn = nnx.jit(sft_loss)
    for step in (0, 5):
        a, b = full(step), cut(step)
        assert b["tokens"].shape == (16, 8)
        np.testing.assert_array_equal(a["tokens"][:, :8], b["tokens"])
        assert not a["attn"][:, 8:].any()
        la, ma = loss_fn(model, {k: jnp.asarray(v) for k, v in a.items()})
        lb, mb = loss_fn(model, {k: jnp.asarray(v) for k, v in b.items()})
        assert float(lb) == pytest.approx(float(la), rel=1e-5)
        assert float(mb["weight"]) == float(ma["weight"])
    longest = TrimmedBatches(full, 64)(0)  # a multiple past the packed length: no cut
    assert longest["tokens"].shape == (16, 48)


def test_batches_grouped_by_length() -> None:
    """Grouped batches: every example once per epoch, similar lengths in a batch, and the
    batch of a step the same from a fresh source (exact resume)."""
    rng = np.random.default_rng(0)
    n, b = 640, 16
    lengths = rng.integers(4, 60, n)
    arrays = {"i": np.arange(n), "attn": np.arange(64)[None, :] < lengths[:, None]}
    grouped = ArrayBatches(arrays, b, seed=1, lengths=lengths, group=8)
    plain = ArrayBatches(arrays, b, seed=1)
    epoch = [grouped(s)["i"] for s in range(grouped.steps_per_epoch)]
    assert sorted(np.concatenate(epoch).tolist()) == list(range(n))
    spread = np.mean([np.ptp(lengths[i]) for i in epoch])
    plain_spread = np.mean([np.ptp(lengths[plain(s)["i"]]) for s in range(plain.steps_per_epoch)])
    assert spread < 0.25 * plain_spread, (spread, plain_spread)
    again = ArrayBatches(arrays, b, seed=1, lengths=lengths, group=8)
    for s in (3, 57, 41):  # any order of steps, any epoch
        np.testing.assert_array_equal(again(s)["i"], grouped(s)["i"])
    assert not np.array_equal(grouped(40)["i"], grouped(0)["i"])  # epoch 1 is reshuffled
    with pytest.raises(Exception, match="one length per example"):
        ArrayBatches(arrays, b, lengths=lengths[:10], group=8)
