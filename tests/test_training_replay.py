"""Replay beside DPO: the term is alpha times SFT's NLL on the replay batch; off is a no-op."""

from __future__ import annotations

from types import MappingProxyType

import numpy as np
import pytest
from flax import nnx

from studio_align.errors import ConfigError
from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer
from studio_align.testing import toy
from studio_align.training.batches import ArrayBatches
from studio_align.training.dpo import DPOConfig, make_dpo_loss, reference_logps
from studio_align.training.loop import TrainConfig, TrainRunConfig, train_loop
from studio_align.training.optim import OptimConfig
from studio_align.training.packing import pack_completions, pack_pairs
from studio_align.training.replay import ReplayBatches, replay_records, with_replay
from studio_align.training.supervised import supervised


def _model(seed: int = 0) -> Transformer:
    return Transformer(ModelConfig.tiny(toy.VOCAB), rngs=nnx.Rngs(seed))


def _pairs(n: int, seed: int) -> dict[str, np.ndarray]:
    p, c, r = toy.preference_pairs(n, seed=seed)
    return pack_pairs(p, c, r, pad_id=toy.PAD, length=8)


def _replay(n: int, seed: int) -> dict[str, np.ndarray]:
    """Labelled sequences of another length than the pairs' (they are packed on their own)."""
    p, c, _ = toy.preference_pairs(n, seed=seed)
    completions = [[*x[:1], *x] if i % 2 else x for i, x in enumerate(c)]  # 2 or 3 tokens
    return pack_completions(p, completions, pad_id=toy.PAD, prefix="replay_")


def _loss(cfg: DPOConfig):  # type: ignore[no-untyped-def]
    """The loss, jitted: one compile instead of one per eager op (seconds on CPU)."""
    return nnx.jit(make_dpo_loss(cfg))


@nnx.jit
def _forward(model: Transformer, tokens, pos, attn):  # type: ignore[no-untyped-def]
    return model(tokens, pos, attn)


def _ref(n: int) -> dict[str, np.ndarray]:
    """Reference log-probs (any values: the replay term does not read them)."""
    rng = np.random.default_rng(n)
    return {
        f"ref_{s}_logps": -rng.uniform(1, 3, n).astype(np.float32) for s in ("chosen", "rejected")
    }


def _hand_nll(model: Transformer, replay: dict[str, np.ndarray]) -> float:
    """Token-mean NLL over completion tokens, from the logits with numpy."""
    tokens, attn = replay["replay_tokens"], replay["replay_attn"]
    pos = np.maximum(np.cumsum(attn, axis=1) - 1, 0)
    logits = np.asarray(_forward(model, tokens, pos, attn), np.float64)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    total, count = 0.0, 0
    for i, j in zip(*np.nonzero(replay["replay_loss"][:, 1:]), strict=True):
        total -= logp[i, j, tokens[i, j + 1]]
        count += 1
    return total / count


def test_replay_term_is_alpha_times_token_mean_nll() -> None:
    model = _model(0)
    pairs = _pairs(8, seed=4)
    ref = _ref(8)
    replay = _replay(8, seed=5)
    batch = {**pairs, **ref, **replay}
    plain, m0 = _loss(DPOConfig())(model, batch)
    with_term, m = _loss(DPOConfig(replay_alpha=0.75))(model, batch)
    nll = _hand_nll(model, replay)
    assert nll > 0
    assert float(m["loss/replay_nll"]) == pytest.approx(nll, rel=1e-4)
    assert float(with_term) == pytest.approx(float(plain) + 0.75 * nll, rel=1e-4)
    assert {k: float(v) for k, v in m.items() if k != "loss/replay_nll"} == pytest.approx(
        {k: float(v) for k, v in m0.items()}
    )


def test_alpha_zero_leaves_the_loss_unchanged() -> None:
    model = _model(1)
    pairs = _pairs(8, seed=6)
    ref = _ref(8)
    base, m_base = _loss(DPOConfig())(model, {**pairs, **ref})
    off, m_off = _loss(DPOConfig(replay_alpha=0.0))(model, {**pairs, **ref, **_replay(8, seed=7)})
    assert DPOConfig().replay_alpha == 0.0
    assert float(off) == float(base)  # the replay fields are never read
    assert set(m_off) == set(m_base) and "loss/replay_nll" not in m_off


def test_replay_batches_cycle_on_their_own_epochs() -> None:
    pairs = ArrayBatches(_pairs(8, seed=0), 4, seed=0)  # 2 steps per epoch
    replay = _replay(12, seed=1)  # 3 batches per epoch
    source = ReplayBatches(pairs, replay, 4, seed=0)
    assert source.steps_per_epoch == 2
    seen = np.concatenate([source(s)["replay_tokens"] for s in range(3)])
    assert seen.shape == (12, replay["replay_tokens"].shape[1])
    # steps 0-2 together are one replay epoch: every replay row exactly once
    rows = sorted(map(tuple, replay["replay_tokens"].tolist()))
    assert sorted(map(tuple, seen.tolist())) == rows
    assert np.array_equal(source(2)["chosen_tokens"], pairs(2)["chosen_tokens"])
    assert with_replay(pairs, None, None, None, batch_size=4, seed=0, pad_id=0) is pairs
    small = ReplayBatches(pairs, _replay(3, seed=2), 4, seed=0)  # fewer records than a batch
    assert small(0)["replay_tokens"].shape[0] == 4


def test_replay_records_off_and_errors() -> None:
    class Task:
        name = "t"
        algorithms = frozenset({"sft", "dpo"})
        record_kinds = MappingProxyType({"sft": "routing_examples", "dpo": "route_dpo_pairs"})

        def sft_pairs(self, start, records):  # type: ignore[no-untyped-def]
            return []

    assert replay_records(Task(), 0.0, None, None) is None
    with pytest.raises(ConfigError, match=r"dpo\.replay_data: replay is on but no records"):
        replay_records(Task(), 1.0, None, None)
    recs = [{"request": {"text": "x"}, "plan": []}]
    assert replay_records(Task(), 1.0, recs, None) is recs
    Task.algorithms = frozenset({"dpo"})
    with pytest.raises(ConfigError, match="no SFT records to replay"):
        replay_records(Task(), 1.0, recs, None)


@pytest.mark.slow
def test_replay_trains_beside_dpo(tmp_path) -> None:
    """Through the train loop: the replay NLL is logged and falls."""
    model = _model(2)
    pairs = _pairs(32, seed=8)
    ref, _ = reference_logps(model, pairs, batch_size=8)
    replay = _replay(24, seed=9)
    source = ReplayBatches(ArrayBatches({**pairs, **ref}, 8, seed=0), replay, 8, seed=0)
    first = float(_loss(DPOConfig(replay_alpha=1.0))(model, source(0))[1]["loss/replay_nll"])
    cfg = TrainRunConfig(
        run_dir=tmp_path,
        train=TrainConfig(steps=30, batch_size=8, log_every=10, progress=False, metrics_hook=False),
    )
    cfg.checkpoint.every = 0
    cfg.optim = OptimConfig(learning_rate=3e-3)
    res = train_loop(model, cfg, supervised(make_dpo_loss(DPOConfig(replay_alpha=1.0)), source))
    assert res.metrics["loss/replay_nll"] < first
