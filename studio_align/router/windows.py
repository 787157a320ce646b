"""Long requests read in windows of whole sentences: the ask in the middle of an email.

Why: the router keeps the head and the tail of a request (`format.MAX_TEXT_TOKENS`, 96
pieces). In an email, meeting notes or a pasted thread the ask sits between a greeting,
background and a sign-off, outside that window. A run of whole sentences that holds the
ask, routed alone, is a short request like those the router was trained on: on the long
validation set the setting was chosen on, some window's plan was the label for 95 % of
requests. Measured on the long set held back, over the quickstart's routers of three seeds
(docs/experiments/router-long-windows.md): SFT exact 0.46 -> 0.67; the served router
abstained 1.4 points less and routed 6.9 points fewer requests wrong.

How, for each request longer than the window, after the plan prior's re-ranking
(`prior.rerank`, which calls `read_windows`):
- the text is cut after each sentence end (`. ! ? 。 ！ ？ ; ；` and line breaks); from each
  sentence on, the longest run of whole sentences within `MAX_TEXT_TOKENS` pieces (at least
  one sentence) is a window; each distinct window is decoded alone, with the request's
  attachments;
- each window's greedy plan competes with the request's plan, each scored
  `log p(plan | the text it was decoded from) + strength * log p_prior(plan)`
  (`PlanPrior.windows`); the highest wins, and a plan the prior never saw cannot win;
- where the prior has `asks` and the ask detector (`asks.py`) finds the request's ask
  sentence in some window, only the windows holding it compete, and the request's own plan
  does not: a window of background is as sure of what it names as the ask's window is;
- the confidence: where the winning window's plan is the plan the whole request gave, or
  every window holding the ask sentence reads that plan, the readings agree and the
  window's confidence (its step logits) is kept; otherwise the plan is scored on the whole
  request and is as doubtful as it is there. The `<plan>` state and the memory key stay the
  whole request's, so the unfamiliarity score reads the request, and feedback on it
  (`Router.embed`) and its lookups share one key. Chosen on the long validation set: with
  the window's confidence everywhere the served router abstained on none and routed 46 %
  wrong (33 % before); with the whole request's everywhere, it abstained on 48 % (35 %).

Windows are decoded `WINDOW_BATCH` at a time (the last batch padded), one compiled shape
per prompt-length bucket that `warm.warm_router` compiles. A request has at most
`MAX_WINDOWS` (16), spread evenly over its text: every request of the long validation sets
has 4-15, and a server's 2,000 characters of short sentences would otherwise be hundreds
of windows, seconds of CPU for one request.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from studio_align.router.analysis import Analysis, analyse
from studio_align.router.calibration import plan_logprob
from studio_align.router.format import MAX_TEXT_TOKENS, request_fields, text_pieces

SENTENCE_END = re.compile(r"(?<=[.!?。！？；;\n])\s*")
WINDOW_BATCH = 8
MAX_WINDOWS = 16


@dataclass(frozen=True)
class LongRows:
    """The requests of one routed batch that are longer than the router's window, with what
    the prior's vote and the windows both read of them: `rows` index the batch (`requests`,
    `prompts`, `inits`); `prior_lp[r]` holds row `rows[r]`'s prior log-probabilities over
    the prior's plans, whose completion ids are `plan_ids`."""

    router: Any
    requests: Sequence[Any]
    prompts: Sequence[Sequence[int]]
    inits: Sequence[int]
    rows: Sequence[int]
    prior_lp: np.ndarray
    plan_ids: Sequence[Sequence[int]]
    asks: Sequence[str | None] | None = None  # each row's ask sentence (`asks.py`), if read


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """`(start, end)` of each sentence of `text` (cut after each sentence end), blank ones left out."""
    cuts = sorted({0, len(text), *(m.end() for m in SENTENCE_END.finditer(text))})
    return [(a, b) for a, b in itertools.pairwise(cuts) if text[a:b].strip()]


def sentences(text: str) -> list[str]:
    """The sentences of `text`, stripped, as `sentence_windows` cuts them."""
    return [text[a:b].strip() for a, b in sentence_spans(text)]


def sentence_windows(
    text: str, pieces: Callable[[str], int], limit: int = MAX_TEXT_TOKENS, most: int = MAX_WINDOWS
) -> list[str]:
    """The distinct runs of whole sentences of `text`, one from each sentence on, each the
    longest within `limit` pieces (`pieces` counts a sentence's) and at least one sentence;
    each a slice of `text`, stripped. Of more than `most`, `most` evenly spread, the first
    and the last among them."""
    spans = sentence_spans(text)
    sizes = [pieces(text[a:b].strip()) for a, b in spans]
    out: list[str] = []
    for i in range(len(spans)):
        j, total = i, 0
        while j < len(spans) and total + sizes[j] <= limit:
            total += sizes[j]
            j += 1
        window = text[spans[i][0] : spans[max(j, i + 1) - 1][1]].strip()
        if window not in out:
            out.append(window)
    if len(out) > most:
        out = [out[round(k * (len(out) - 1) / (most - 1))] for k in range(most)]
    return out


def read_windows(
    long: LongRows,
    plans: list[list[int]],
    logps: np.ndarray,
    an: Analysis | None,
    strength: float,
) -> tuple[list[list[int]], np.ndarray, Analysis | None]:
    """`plans` (completion ids), their log-probabilities and analysis with each long
    request's plan replaced where a window's plan wins (module docstring). `an` None: only
    plans and log-probabilities."""
    router, rows = long.router, long.rows
    column = {tuple(c): j for j, c in enumerate(long.plan_ids)}

    def score(r: int, plan: Sequence[int], logp: float) -> float:
        j = column.get(tuple(plan))
        return -np.inf if j is None else logp + strength * float(long.prior_lp[r, j])

    owner, texts, found = [], [], set()
    for r, i in enumerate(rows):
        text, atts = request_fields(long.requests[i])
        windows = sentence_windows(text, lambda t: text_pieces(router.tokenizer, {"text": t}))
        ask = None if long.asks is None else long.asks[r]
        if ask is not None and any(ask in w for w in windows):
            windows = [w for w in windows if ask in w]
            found.add(r)
        for window in windows:
            owner.append(r)
            texts.append({"text": window, "attachments": atts})
    comps, wan = decode_windows(router, texts)
    wlogp = plan_logprob(wan.step_logits, wan.actions)
    # with its ask sentence found, a request's plan is that of a window holding the ask
    best = [-np.inf if r in found else score(r, plans[i], float(logps[i]))
            for r, i in enumerate(rows)]  # fmt: skip
    won: dict[int, int] = {}  # row of `rows` -> its winning window
    read: dict[int, set[tuple[int, ...]]] = {}  # row of `rows` -> the plans its windows read
    for w, r in enumerate(owner):
        read.setdefault(r, set()).add(tuple(comps[w]))
        s = score(r, comps[w], float(wlogp[w]))
        if s > best[r]:
            best[r], won[r] = s, w
    if not won:
        return plans, logps, an
    # the windows holding the ask that all read one plan are as sure as a window and the
    # whole request reading it alike
    settled = {r for r in found if len(read[r]) == 1}
    agree = {r: w for r, w in won.items() if list(comps[w]) == plans[rows[r]] or r in settled}
    differ = [(r, w) for r, w in won.items() if r not in agree]
    full = None
    if differ:
        full = analyse(router, [long.prompts[rows[r]] for r, _ in differ],
                       [comps[w] for _, w in differ], [long.inits[rows[r]] for r, _ in differ])  # fmt: skip
    if an is not None:
        an = Analysis(np.array(an.step_logits), np.array(an.actions), an.hidden, an.sentence)
    for r, w in agree.items():
        i = rows[r]
        plans[i] = list(comps[w])
        logps[i] = wlogp[w]
        if an is not None:
            an.step_logits[i], an.actions[i] = wan.step_logits[w], wan.actions[w]
    if full is not None:
        own = plan_logprob(full.step_logits, full.actions)
        for q, (r, w) in enumerate(differ):
            i = rows[r]
            plans[i], logps[i] = list(comps[w]), float(own[q])
            if an is not None:  # the `<plan>` state is the whole request's: only the steps change
                an.step_logits[i], an.actions[i] = full.step_logits[q], full.actions[q]
    return plans, logps, an


def decode_windows(router: Any, windows: Sequence[Any]) -> tuple[list[list[int]], Analysis]:
    """Greedy plans and their analysis for `windows` (requests within the router's window),
    `WINDOW_BATCH` at a time, the last batch padded with its own last window. Without the
    sentence vectors: a window's memory key is never used (module docstring)."""
    comps: list[list[int]] = []
    parts: list[Analysis] = []
    for s in range(0, len(windows), WINDOW_BATCH):
        chunk = list(windows[s : s + WINDOW_BATCH])
        n = len(chunk)
        chunk += [chunk[-1]] * (WINDOW_BATCH - n)
        c, a = router._analyse(*router.encode(chunk))
        comps += [list(x) for x in c[:n]]
        parts.append(Analysis(a.step_logits[:n], a.actions[:n], a.hidden[:n]))
    return comps, Analysis(*(np.concatenate([getattr(p, f) for p in parts])
                             for f in ("step_logits", "actions", "hidden")))  # fmt: skip
