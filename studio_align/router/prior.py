"""The plan prior: the frozen pretrained encoder's vote on requests longer than the router reads.

Why: the router reads at most `format.MAX_TEXT_TOKENS` (96) text pieces, the head and the
tail, and its encoder is fine-tuned on generated requests, none of them long. On long
messages (an email, meeting notes, a pasted thread, the ask somewhere in the middle) it
is right about as often as USE + logistic regression over the *frozen* encoder, which
reads up to 256 pieces, and the two miss different requests. A multinomial logistic
regression over the frozen encoder's sentence vector (plus the attachments), fitted on
the router's own training split, is the prior; on a long request it re-ranks the router's
plan. Measured over the quickstart's SFT routers of three seeds
(docs/experiments/router-plan-prior.md): on the long validation set chosen on, +14.6
points; on the one held back, +6.9 (0.38 to 0.44). Applied to every request, the same
prior helps as many short sets as it hurts, so it is gated by length.

How a long request is routed:
- the router decodes its greedy plan, as for any request;
- the candidates are that plan and the prior's `top_k` plans valid for the request's
  attachments; each is scored `log p_router(plan) + strength * log p_prior(plan)`, the
  router's constrained, renormalised log-probability from one scoring pass over every
  candidate of the batch (a candidate that cannot win even with all of the probability
  the greedy plan leaves, `1 - p_router(greedy)`, is not scored);
- the highest score wins. A greedy plan the prior has never seen (not one of its plans)
  is kept: the prior has no vote on it.
Confidence, calibration, abstention and the memory then read the router's own analysis of
the plan that won (`analysis.analyse`), so a plan the router doubts stays doubtful. Where
the prior has a `windows` weight, the plan that won then competes with the plans of the
request's windows of sentences (`windows.py`), with `asks` only those of the windows that
hold its ask sentence (`asks.py`).

A checkpoint carries its prior as `plan_prior.npz` (the plans, weights, `strength`,
`top_k`, `windows`, `asks`; a file saved before them reads `windows` 0 and `asks` false);
`Router.load` reads it, and a router without one routes as before. The router pipelines fit
it after SFT (`stage_run.prior_stage`); `model fit-prior` fits it for a router trained any
other way.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from studio_align.catalog import ATTACHMENT_KINDS, Catalog
from studio_align.errors import CheckpointError
from studio_align.models.encoders.protocol import encode_texts
from studio_align.router.analysis import Analysis, analyse
from studio_align.router.asks import ask_sentences
from studio_align.router.calibration import plan_logprob
from studio_align.router.format import MAX_TEXT_TOKENS, encode_plan, request_fields, text_pieces
from studio_align.router.frozen import fit_logistic, frozen_encoder
from studio_align.router.windows import LongRows, read_windows, sentences

PRIOR_FILE = "plan_prior.npz"
L2_GRID = (1e-6, 1e-5, 1e-4)  # 1e-7 and 1e-3 were never chosen on validation (3 seeds)


def prior_features(requests: Sequence[Any], *, batch_size: int = 64) -> np.ndarray:
    """`[N, 512 + 3]`: the frozen encoder's vector of each request's whole text (up to 256
    pieces) and one flag per attachment kind."""
    if not requests:
        return np.zeros((0, prior_dim()), np.float32)
    texts, atts = zip(*(request_fields(r) for r in requests), strict=True)
    distinct = sorted(set(texts))  # generated training splits repeat requests
    vecs = encode_texts(frozen_encoder(), distinct, batch_size=batch_size)
    row = {t: i for i, t in enumerate(distinct)}
    vec = vecs[[row[t] for t in texts]]
    flags = np.array([[k in a for k in ATTACHMENT_KINDS] for a in atts], np.float32)
    return np.concatenate([vec, flags], axis=1)


@dataclass
class PlanPrior:
    """A logistic regression over `plans` (step-name tuples) on `prior_features`."""

    plans: tuple[tuple[str, ...], ...]
    weight: np.ndarray  # [512 + 3, P]
    bias: np.ndarray  # [P]
    strength: float  # the weight of its log-probability against the router's
    top_k: int  # how many of its plans are candidates
    windows: float = 0.0  # its weight against a window's plan (`windows.py`); 0: no windows
    asks: bool = False  # only windows holding the ask sentence compete (`asks.py`)

    def log_probs_of(self, x: np.ndarray, attachments: Sequence[Sequence[str]], catalog: Catalog):
        """`[N, P]` log-probabilities over the plans valid for each request's attachments
        (-inf for the others), from features `x`."""
        valid = np.array([[catalog.is_valid(list(p), list(a)) for p in self.plans]
                          for a in attachments])  # fmt: skip
        logits = np.where(valid, x @ self.weight + self.bias, -np.inf)
        top = logits.max(axis=1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        with np.errstate(divide="ignore"):
            norm = top + np.log(np.exp(logits - top).sum(axis=1, keepdims=True))
        return logits - norm

    def log_probs(self, requests: Sequence[Any], catalog: Catalog) -> np.ndarray:
        atts = [request_fields(r)[1] for r in requests]
        return self.log_probs_of(prior_features(requests), atts, catalog)

    def save(self, directory: str | Path) -> Path:
        f = Path(directory) / PRIOR_FILE
        np.savez(
            f,
            plans=np.array(json.dumps([list(p) for p in self.plans])),
            weight=self.weight.astype(np.float32),
            bias=self.bias.astype(np.float32),
            strength=np.float32(self.strength),
            top_k=np.int32(self.top_k),
            windows=np.float32(self.windows),
            asks=np.bool_(self.asks),
        )
        return f

    @classmethod
    def load(cls, directory: str | Path) -> PlanPrior | None:
        """The checkpoint's prior, or None when it has none; a damaged file is one line."""
        f = Path(directory) / PRIOR_FILE
        if not f.exists():
            return None
        try:
            with np.load(f) as z:
                plans = tuple(tuple(str(s) for s in p) for p in json.loads(str(z["plans"])))
                windows = float(z["windows"]) if "windows" in z.files else 0.0  # saved before them
                asks = bool(z["asks"]) if "asks" in z.files else False
                prior = cls(plans, z["weight"], z["bias"], float(z["strength"]), int(z["top_k"]),
                            windows, asks)  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise CheckpointError(f"{f}: invalid plan prior ({e})") from e
        if prior.weight.shape != (prior_dim(), len(plans)) or prior.bias.shape != (len(plans),):
            raise CheckpointError(
                f"{f}: weights {prior.weight.shape} and bias {prior.bias.shape} do not fit "
                f"{len(plans)} plans over {prior_dim()} features"
            )
        return prior


def prior_dim() -> int:
    return 512 + len(ATTACHMENT_KINDS)


def fit_prior(
    train: Sequence[dict[str, Any]],
    val: Sequence[dict[str, Any]],
    catalog: Catalog,
    *,
    strength: float,
    top_k: int,
    windows: float = 0.0,
    asks: bool = False,
) -> PlanPrior:
    """Fit the prior on `train` (rows with `request` and `plan`) over the plans it holds,
    the L2 weight chosen by exact-plan accuracy on `val` (the middle of the grid when `val`
    is empty); `windows` its weight against windows' plans (0: none), `asks` whether only
    windows holding the ask sentence compete."""
    plans = tuple(sorted({tuple(r["plan"]) for r in train}))
    index = {p: i for i, p in enumerate(plans)}
    x = prior_features([r["request"] for r in train])
    y = np.array([index[tuple(r["plan"])] for r in train])
    if not val:
        w, b = fit_logistic(x, y, len(plans), L2_GRID[len(L2_GRID) // 2])
        return PlanPrior(plans, w, b, strength, top_k, windows, asks)
    vx = prior_features([r["request"] for r in val])
    gold = np.array([index.get(tuple(r["plan"]), -1) for r in val])
    vatts = [request_fields(r["request"])[1] for r in val]
    best: tuple[float, PlanPrior] | None = None
    for l2 in L2_GRID:
        w, b = fit_logistic(x, y, len(plans), l2)
        prior = PlanPrior(plans, w, b, strength, top_k, windows, asks)
        acc = float(np.mean(prior.log_probs_of(vx, vatts, catalog).argmax(axis=1) == gold))
        if best is None or acc > best[0]:
            best = (acc, prior)
    assert best is not None
    return best[1]


def is_long(tok: Any, request: Any, prompt: Sequence[int]) -> bool:
    """Whether the request's text is longer than the router's window (the prompt's text
    part is checked first, so short requests are not tokenized twice)."""
    atts = request_fields(request)[1]
    markers = sum(k in atts for k in ATTACHMENT_KINDS)  # one per kind, as `encode_prompt`
    shown = len(prompt) - 2 - markers  # <bos> text markers <plan>
    return shown >= MAX_TEXT_TOKENS and text_pieces(tok, request) > MAX_TEXT_TOKENS


def rerank(
    router: Any,
    requests: Sequence[Any],
    prompts: Sequence[Sequence[int]],
    inits: Sequence[int],
    comps: Sequence[Sequence[int]],
    logps: np.ndarray | None,
    an: Analysis | None,
) -> tuple[list[list[int]], np.ndarray | None, Analysis | None]:
    """The router's plans (completion ids), their log-probabilities and analysis, with the
    plans of requests longer than its window re-ranked by `router.prior` (module
    docstring), then, where the prior has `windows`, read in windows of sentences
    (`windows.py`). `logps` None: read from `an` where a long request needs them. Nothing
    changes for a router without a prior or a batch without a long request."""
    plans = [list(c) for c in comps]
    prior: PlanPrior | None = router.prior
    long = [i for i, (r, p) in enumerate(zip(requests, prompts, strict=True))
            if prior is not None and is_long(router.tokenizer, r, p)]  # fmt: skip
    if prior is None or prior.strength <= 0 or not long:
        return plans, logps, an
    if logps is None:
        assert an is not None
        logps = plan_logprob(an.step_logits, an.actions)
    logps = np.array(logps, np.float64)
    lp = prior.log_probs([requests[i] for i in long], router.catalog)
    plan_ids = [encode_plan(router.tokenizer, list(p)) for p in prior.plans]
    asks = None
    if prior.windows > 0 and prior.asks:
        asks = ask_sentences([request_fields(requests[i])[0] for i in long], sentences)
    long_rows = LongRows(router, requests, prompts, inits, long, lp, plan_ids, asks)
    plans, logps, an = _vote(long_rows, prior, plans, logps, an)
    if prior.windows > 0:
        plans, logps, an = read_windows(long_rows, plans, logps, an, prior.windows)
    return plans, logps, an


def _vote(
    long: LongRows,
    prior: PlanPrior,
    plans: list[list[int]],
    logps: np.ndarray,
    an: Analysis | None,
) -> tuple[list[list[int]], np.ndarray, Analysis | None]:
    """The prior's vote on the long requests' plans: the greedy plan against the prior's
    `top_k`, each scored on the whole request."""
    router, rows, lp, plan_ids = long.router, long.rows, long.prior_lp, long.plan_ids
    index = {tuple(c): j for j, c in enumerate(plan_ids)}
    best = np.full(len(rows), -np.inf)
    for r, i in enumerate(rows):
        g = index.get(tuple(plans[i]))
        if g is not None:  # a plan the prior never saw keeps -inf: no vote, no change
            best[r] = logps[i] + prior.strength * lp[r, g]
    # a candidate other than the greedy plan has at most 1 - p(greedy) of the router's
    # probability, so one whose bound cannot beat the greedy plan's score is not scored
    with np.errstate(divide="ignore"):
        room = np.log1p(-np.exp(np.minimum(logps[list(rows)], 0.0)))
    pairs = [(r, int(j)) for r in range(len(rows)) for j in np.argsort(-lp[r])[: prior.top_k]
             if np.isfinite(best[r]) and np.isfinite(lp[r, j]) and plan_ids[j] != plans[rows[r]]
             and room[r] + prior.strength * lp[r, j] > best[r]]  # fmt: skip
    if not pairs:
        return plans, logps, an
    a = analyse(router, [long.prompts[rows[r]] for r, _ in pairs], [plan_ids[j] for _, j in pairs],
                [long.inits[rows[r]] for r, _ in pairs])  # fmt: skip
    own = plan_logprob(a.step_logits, a.actions)
    won: dict[int, tuple[int, int]] = {}  # row of `rows` -> (plan, row of `a`)
    for q, (r, j) in enumerate(pairs):
        score = own[q] + prior.strength * lp[r, j]
        if score > best[r]:
            best[r], won[r] = score, (j, q)
    if won and an is not None:  # the `<plan>` state is the prompt's: only the steps change
        an = Analysis(np.array(an.step_logits), np.array(an.actions), an.hidden, an.sentence)
    for r, (j, q) in won.items():
        i = rows[r]
        plans[i], logps[i] = list(plan_ids[j]), float(own[q])
        if an is not None:
            an.step_logits[i], an.actions[i] = a.step_logits[q], a.actions[q]
    return plans, logps, an
