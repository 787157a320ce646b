"""KTO trainer: unpaired toy samples; the implicit reward separates good from bad held out."""

from __future__ import annotations

import numpy as np
from flax import nnx

from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer
from studio_align.testing import toy
from studio_align.training.batches import ArrayBatches
from studio_align.training.kto import (
    KTOConfig,
    balanced_weights,
    evaluate_samples,
    make_kto_loss,
    reference_logps,
)
from studio_align.training.loop import TrainConfig, TrainRunConfig, train_loop
from studio_align.training.optim import OptimConfig
from studio_align.training.packing import pack_unpaired
from studio_align.training.supervised import supervised


def _samples(n: int, seed: int, heldout: bool = False) -> dict[str, np.ndarray]:
    p, c, r = toy.preference_pairs(n, seed=seed, heldout=heldout)
    rng = np.random.default_rng(seed)
    good = rng.random(n) < 0.4  # imbalanced: fewer desirable samples
    comps = [ci if g else ri for ci, ri, g in zip(c, r, good, strict=True)]
    return pack_unpaired(p, comps, good, pad_id=toy.PAD, length=8)


def test_pack_unpaired_mismatches_completions() -> None:
    a = pack_unpaired(
        [[1, 4], [1, 5], [1, 6]], [[24, 2], [25, 2], [26, 2]], [True, False, True], pad_id=0
    )
    assert a["tokens"][0, :4].tolist() == [1, 4, 24, 2]
    assert a["kl_tokens"][0, :4].tolist() == [1, 4, 25, 2]
    assert a["kl_tokens"][2, :4].tolist() == [1, 6, 24, 2]
    assert a["desirable"].tolist() == [True, False, True]


def test_balanced_weights() -> None:
    assert balanced_weights(np.array([True, False, False, False])) == (3.0, 1.0)
    assert balanced_weights(np.array([True, True])) == (1.0, 1.0)


def test_kto_reference_cache(tmp_path) -> None:
    model = Transformer(ModelConfig.tiny(toy.VOCAB), rngs=nnx.Rngs(0))
    s = _samples(12, seed=0)
    a, hit = reference_logps(model, s, batch_size=5, cache_dir=tmp_path)
    b, hit2 = reference_logps(model, s, batch_size=5, cache_dir=tmp_path)
    assert (hit, hit2) == (False, True)
    np.testing.assert_array_equal(a["ref_kl_logps"], b["ref_kl_logps"])
    _, hit3 = reference_logps(
        Transformer(ModelConfig.tiny(toy.VOCAB), rngs=nnx.Rngs(1)), s, cache_dir=tmp_path
    )
    assert not hit3


def test_kto_toy_run_separates_heldout(tmp_path) -> None:
    policy = Transformer(ModelConfig.tiny(toy.VOCAB), rngs=nnx.Rngs(0))
    ref = Transformer(ModelConfig.tiny(toy.VOCAB), rngs=nnx.Rngs(0))
    train, held = _samples(256, seed=1), _samples(128, seed=2, heldout=True)
    ref_train, _ = reference_logps(ref, train)
    ref_held, _ = reference_logps(ref, held)
    before = evaluate_samples(policy, held, ref_held)
    wd, _ = balanced_weights(train["desirable"])
    loss_fn = make_kto_loss(KTOConfig(beta=0.5), desirable_weight=wd)
    run = TrainRunConfig(
        run_dir=tmp_path / "run",
        train=TrainConfig(
            steps=60, batch_size=32, log_every=20, progress=False, metrics_hook=False
        ),
        optim=OptimConfig(learning_rate=3e-3, decay="constant"),
    )
    run.checkpoint.every = 0
    result = train_loop(
        policy,
        run,
        supervised(loss_fn, ArrayBatches({**train, **ref_train}, 32, seed=0)),
        name="kto",
    )
    after = evaluate_samples(policy, held, ref_held)
    print("held-out KTO accuracy", before["accuracy"], "->", after["accuracy"], after)
    assert after["logratio/gap"] > 1.0 > before["logratio/gap"]
    assert after["accuracy"] >= 0.9
    assert after["auc"] >= 0.95
    assert np.isfinite(result.metrics["loss"]) and "kl" in result.metrics
