"""DPO trainer: reference cache keyed by reference and dataset; toy run learns the rule."""

from __future__ import annotations

import numpy as np
import pytest
from flax import nnx

from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer
from studio_align.testing import toy
from studio_align.training.dpo import (
    DPOConfig,
    evaluate_pairs,
    make_dpo_loss,
    pair_logps,
    reference_logps,
)
from studio_align.training.loop import TrainConfig, TrainRunConfig, train_loop
from studio_align.training.optim import OptimConfig
from studio_align.training.packing import pack_pairs
from studio_align.training.supervised import supervised


def _model(seed: int = 0) -> Transformer:
    return Transformer(ModelConfig.tiny(toy.VOCAB), rngs=nnx.Rngs(seed))


def _pairs(n: int, seed: int, heldout: bool = False) -> dict[str, np.ndarray]:
    p, c, r = toy.preference_pairs(n, seed=seed, heldout=heldout)
    return pack_pairs(p, c, r, pad_id=toy.PAD, length=8)


def test_pack_pairs_layout() -> None:
    a = pack_pairs([[1, 4]], [[24, 2]], [[25, 26, 2]], pad_id=0)
    assert a["chosen_tokens"].shape == a["rejected_tokens"].shape == (1, 8)
    assert a["chosen_tokens"][0, :4].tolist() == [1, 4, 24, 2]
    assert a["chosen_loss"][0].tolist() == [0, 0, 1, 1, 0, 0, 0, 0]
    assert a["rejected_attn"][0].tolist() == [1, 1, 1, 1, 1, 0, 0, 0]


def test_reference_cache_hit_and_invalidation(tmp_path) -> None:
    ref = _model(0)
    pairs = _pairs(10, seed=1)
    first, hit = reference_logps(ref, pairs, batch_size=4, cache_dir=tmp_path)
    assert not hit and first["ref_chosen_logps"].shape == (10,)
    again, hit = reference_logps(ref, pairs, batch_size=4, cache_dir=tmp_path)
    assert hit
    np.testing.assert_array_equal(again["ref_chosen_logps"], first["ref_chosen_logps"])
    # a direct computation agrees with the cached values (padding of the last chunk is dropped)
    direct, _ = reference_logps(ref, pairs, batch_size=10, cache_dir=None)
    np.testing.assert_allclose(direct["ref_chosen_logps"], first["ref_chosen_logps"], rtol=1e-5)
    # another reference model: a miss, different values
    other, hit = reference_logps(_model(1), pairs, batch_size=4, cache_dir=tmp_path)
    assert not hit and not np.allclose(other["ref_chosen_logps"], first["ref_chosen_logps"])
    # one token of the dataset changed: a miss
    changed = {k: v.copy() for k, v in pairs.items()}
    changed["rejected_tokens"][3, 3] = (changed["rejected_tokens"][3, 3] + 1) % toy.VOCAB
    _, hit = reference_logps(ref, changed, batch_size=4, cache_dir=tmp_path)
    assert not hit
    # a length-normalised loss caches separately
    _, hit = reference_logps(ref, pairs, loss_type="ipo", batch_size=4, cache_dir=tmp_path)
    assert not hit
    assert len(list(tmp_path.glob("*.npz"))) == 4


def _train(loss_type: str, tmp_path, steps: int = 60) -> tuple[dict, dict]:
    policy, ref = _model(0), _model(0)
    train, held = _pairs(256, seed=2), _pairs(128, seed=3, heldout=True)
    cfg = DPOConfig(loss_type=loss_type, beta=0.5 if loss_type != "ipo" else 0.1)
    ref_train, _ = reference_logps(ref, train, loss_type=loss_type, cache_dir=tmp_path / "cache")
    ref_held, _ = reference_logps(ref, held, loss_type=loss_type, cache_dir=tmp_path / "cache")
    before = evaluate_pairs(policy, held, ref_held)
    from studio_align.training.batches import ArrayBatches

    run = TrainRunConfig(
        run_dir=tmp_path / "run",
        train=TrainConfig(
            steps=steps, batch_size=32, log_every=20, progress=False, metrics_hook=False
        ),
        optim=OptimConfig(learning_rate=3e-3, decay="constant"),
    )
    run.checkpoint.every = 0
    result = train_loop(
        policy,
        run,
        supervised(make_dpo_loss(cfg), ArrayBatches({**train, **ref_train}, 32, seed=0)),
        name="dpo",
    )
    after = evaluate_pairs(policy, held, ref_held)
    return before, {**after, **{f"train/{k}": v for k, v in result.metrics.items()}}


def test_dpo_toy_run_learns_heldout_preferences(tmp_path) -> None:
    before, after = _train("sigmoid", tmp_path)
    print("held-out accuracy", before["accuracy"], "->", after["accuracy"])
    assert before["accuracy"] < 0.75
    assert after["accuracy"] >= 0.95
    assert after["reward_accuracy"] >= 0.95
    assert after["train/rewards/accuracy"] > 0.9


@pytest.mark.parametrize(
    "loss_type",
    [
        "ipo",
        pytest.param("simpo", marks=pytest.mark.slow),
        pytest.param("orpo", marks=pytest.mark.slow),
    ],
)
def test_dpo_variants_train(loss_type: str, tmp_path) -> None:
    before, after = _train(loss_type, tmp_path, steps=40)
    assert after["accuracy"] > max(before["accuracy"], 0.85)


def test_loss_at_reference_is_log2() -> None:
    model = _model(0)
    pairs = _pairs(8, seed=4)
    ref, _ = reference_logps(model, pairs, batch_size=8)
    loss_fn = make_dpo_loss(DPOConfig())
    loss, m = loss_fn(model, {**pairs, **ref})
    # policy == reference: the implicit reward margin is 0 and the sigmoid loss is log 2
    assert float(loss) == pytest.approx(np.log(2.0), rel=1e-4)
    assert abs(float(m["rewards/margin"])) < 1e-4


def test_nll_alpha_adds_chosen_per_token_nll() -> None:
    """RPO: the loss is DPO's plus alpha times the chosen completions' per-token NLL."""
    model = _model(0)
    pairs = _pairs(8, seed=4)
    ref, _ = reference_logps(model, pairs, batch_size=8)
    batch = {**pairs, **ref}
    plain, _ = make_dpo_loss(DPOConfig())(model, batch)
    rpo, m = make_dpo_loss(DPOConfig(nll_alpha=0.5))(model, batch)
    out = pair_logps(model, batch)
    nll = -np.mean(np.asarray(out["chosen_logps"]) / np.asarray(out["chosen_len"]))
    assert nll > 0
    assert float(m["loss/nll_chosen"]) == pytest.approx(nll, rel=1e-4)
    assert float(rpo) == pytest.approx(float(plain) + 0.5 * nll, rel=1e-4)


def test_evaluations_reuse_one_compile() -> None:
    from studio_align.models.config import ModelConfig
    from studio_align.models.transformer import Transformer
    from studio_align.testing.toy import VOCAB, preference_pairs
    from studio_align.training import dpo
    from studio_align.training.packing import pack_pairs

    pairs = pack_pairs(*preference_pairs(32, seed=0), pad_id=0)
    before = dpo._score_pairs._cache_size()
    for seed in (0, 1, 2):  # a new model (as after each training window) each time
        m = Transformer(ModelConfig.tiny(vocab_size=VOCAB), rngs=nnx.Rngs(seed))
        dpo.evaluate_pairs(m, pairs, batch_size=16)
    assert dpo._score_pairs._cache_size() - before <= 1
