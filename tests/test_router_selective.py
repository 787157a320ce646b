"""Selective accuracy, calibration, abstention and the exemplar memory (tiny untrained router)."""

from __future__ import annotations

import numpy as np
import pytest
from flax import nnx

from studio_align.catalog import default_catalog
from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer
from studio_align.router import eval as packaged
from studio_align.router.calibration import (
    Calibration,
    OODModel,
    fit_calibration,
    fit_temperature,
    plan_logprob,
)
from studio_align.router.checkpoint import save_router
from studio_align.router.evaluate import evaluate_router
from studio_align.router.format import build_tokenizer, is_cjk
from studio_align.router.memory import ExemplarMemory
from studio_align.router.router import Router
from studio_align.router.selective import coverage_at, risk_coverage, threshold_for
from studio_align.simulate.router.requests import generate_examples

CAT = default_catalog()
EXAMPLES = generate_examples(300, seed=0)


@pytest.fixture(scope="module")
def router():
    tok = build_tokenizer([e["request"]["text"] for e in EXAMPLES], CAT, vocab_size=600)
    model = Transformer(ModelConfig.tiny(vocab_size=640), rngs=nnx.Rngs(0))
    return Router(model, tok, CAT)


def test_coverage_and_threshold() -> None:
    scores = [0.9, 0.8, 0.7, 0.6, 0.5]
    correct = [True, True, False, True, False]
    assert coverage_at(scores, correct, 1.0) == pytest.approx(0.4)
    assert coverage_at(scores, correct, 0.75) == pytest.approx(0.8)
    assert threshold_for(scores, correct, 0.75) == pytest.approx(0.6)
    assert threshold_for(scores, correct, 1.01) == float("inf")
    curve = risk_coverage(scores, correct)
    assert curve[-1]["coverage"] == 1.0 and curve[-1]["selective_accuracy"] == pytest.approx(0.6)
    # tied scores are kept or dropped together
    assert coverage_at([0.5, 0.5], [True, False], 1.0) == 0.0


def test_temperature_recovers_overconfidence() -> None:
    rng = np.random.default_rng(0)
    n, v = 400, 6
    logits = rng.normal(size=(n, 1, v)) * 6.0  # sharp: overconfident if right half the time
    actions = logits.argmax(-1)
    correct = rng.random(n) < 0.6
    t = fit_temperature(logits, actions, correct)
    assert t > 1.5
    conf = np.exp(plan_logprob(logits, actions, t))
    assert abs(conf.mean() - correct.mean()) < 0.1


def test_ood_model_flags_far_points() -> None:
    rng = np.random.default_rng(0)
    h = rng.normal(size=(200, 8))
    labels = ["a"] * 100 + ["b"] * 100
    h[100:] += 5.0
    ood = OODModel.fit(h, labels)
    near, far = ood.score(h[:5]), ood.score(h[:5] + 40.0)
    assert (far > near.max() * 3).all()


def test_decide_abstains_with_reason_and_keeps_best_plan(router, tmp_path) -> None:
    reqs = [e["request"] for e in EXAMPLES[:6]]
    plans, _ = router.route_raw(reqs)
    router.calibration = Calibration(temperature=2.0, confidence_threshold=1.1)
    ds = router.decide(reqs)
    assert [d["plan"] for d in ds] == plans
    assert all(d["abstain"] and d["reason"] == "low_confidence" for d in ds)
    d_model = int(router.model.cfg.d_model)
    eye = np.eye(d_model, dtype=np.float32)
    router.calibration.ood = OODModel(np.zeros((1, d_model), np.float32), eye)
    router.calibration.ood_threshold = -1.0
    assert {d["reason"] for d in router.decide(reqs)} == {"unfamiliar_request"}
    router.calibration.save(tmp_path)
    back = Calibration.load(tmp_path)
    assert back is not None and back.temperature == 2.0 and back.ood is not None
    router.calibration = None


def test_fit_calibration_and_checkpoint_round_trip(router, tmp_path) -> None:
    val = packaged.load("handwritten_val")[:24]
    cal = fit_calibration(router, EXAMPLES, val, target=0.9, n_train=300)
    assert cal.temperature > 0 and cal.ood is not None
    figs = evaluate_router(router, val)[0]
    assert {"ece", "ece_uncalibrated", "abstain_rate", "accuracy_when_routed"} <= set(figs)
    assert 0.0 <= figs["selective"]["coverage_at_target"] <= 1.0
    assert figs["selective"]["curve"][-1]["coverage"] == 1.0
    save_router(tmp_path / "r", router.model, router.tokenizer, CAT)
    router.remember([EXAMPLES[0]["request"]], [["audio.music"]], ["c1"])
    router.save_state(tmp_path / "r")
    loaded = Router.load(tmp_path / "r")
    assert loaded.calibration is not None and loaded.calibration.temperature == cal.temperature
    assert loaded.memory is not None and len(loaded.memory) == 1
    d = loaded.decide([EXAMPLES[0]["request"]], creators=["c1"])[0]
    assert d["plan"] == ["audio.music"] and d["source"] == "creator_memory"
    router.calibration, router.memory = None, None


def test_unfamiliarity_in_confidence_is_what_decide_serves(router) -> None:
    val = packaged.load("handwritten_val")[:24]
    cal = fit_calibration(
        router, EXAMPLES, val, target=0.9, n_train=300, unfamiliarity_in_confidence=True
    )
    assert cal.ood_weight <= 0.0
    reqs = [e["request"] for e in EXAMPLES[:5]]
    _, an = router.analyse(reqs)
    unfam = cal.unfamiliarity(an.hidden)
    p = np.clip(cal.confidence(an.step_logits, an.actions), 1e-6, 1 - 1e-6)
    z = cal.slope * np.log(p / (1 - p)) + cal.ood_weight * unfam + cal.bias
    by_hand = 1 / (1 + np.exp(-z))
    got = [d["confidence"] for d in router.decide(reqs)]
    # decide works in float32 and the log-odds scale a small confidence's rounding by |z|
    # (up to ~10 here): 1e-5 is float32's reach; a wrong formula is off by far more
    np.testing.assert_allclose(got, by_hand, rtol=1e-5)
    router.calibration = None


def test_memory_bounds_and_population_vote() -> None:
    mem = ExemplarMemory(per_creator=3, capacity=5, population_sim=0.9, min_votes=2, k=3)
    e = np.ones(4, np.float32)
    for i in range(4):
        mem.add(e, ["audio.music"] if i else ["audio.speech"], "c1", [])
    assert len(mem) == 3  # the oldest (speech) is gone
    hit = mem.lookup(e, "c1", [])
    assert hit is not None and hit.plan == ("audio.music",) and hit.source == "creator_memory"
    assert mem.lookup(e, "c2", ["image"]) is None  # other attachments never match
    assert mem.lookup(e, "c2", []) is None  # one creator's three posts are one vote
    mem.add(e, ["audio.music"], "c3", [])
    hit = mem.lookup(e, "c2", [])
    assert hit is not None and hit.source == "population_memory"
    assert mem.lookup(-e, "c2", []) is None


def test_packaged_sets_are_valid_and_balanced() -> None:
    for name in packaged.SETS:
        rows = packaged.load(name)
        assert all(CAT.is_valid(r["plan"], r["request"]["attachments"]) for r in rows)
        zh = sum(is_cjk(r["request"]["text"]) for r in rows)
        if name in packaged.OTHER_LANGUAGE_SETS:
            langs = {r["style"] for r in rows}  # each row's style names its language
            assert len(langs) >= 4 and not langs & {"english", "chinese"}
        else:
            assert 0.4 <= zh / len(rows) <= 0.6
    v2 = packaged.load("handwritten_v2")
    assert len(v2) >= 200
    val_texts = {r["request"]["text"] for n in packaged.VAL_SETS for r in packaged.load(n)}
    eval_texts = {r["request"]["text"] for n in packaged.EVAL_SETS for r in packaged.load(n)}
    assert not val_texts & eval_texts


def test_evaluate_router_sets_matches_one_set_at_a_time(router) -> None:
    """Routing the union of the sets' requests once gives each set its own figures."""
    from studio_align.router.evaluate import evaluate_router_sets

    val = packaged.load("handwritten_val")[:8]
    relabelled = [{**e, "plan": ["audio.music"]} for e in val]  # same requests, other gold
    sets = {"a": val, "b": relabelled, "c": EXAMPLES[:8]}
    for calibrated in (False, True):
        if calibrated:
            fit_calibration(router, EXAMPLES, val, target=0.9, n_train=300)
        together = evaluate_router_sets(router, sets, batch_size=8)
        for name, rows in sets.items():
            alone, plans, confs = evaluate_router(router, rows, batch_size=8)
            figs, p, c = together[name]
            assert p == plans and c == pytest.approx(confs)
            for key in ("exact_plan_accuracy", "step_f1", "ece"):
                assert figs[key] == pytest.approx(alone[key])
    router.calibration = None
