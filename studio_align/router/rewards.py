"""Routing rewards (registered by `router.plugin`):

* `intent_accuracy(plans, gold_plans)`: 1.0 for the exact gold plan, otherwise partial
  credit by the **ordered-step F1**. With L the length of the longest common
  subsequence of the two step lists (steps matched in order, gaps allowed),
  precision P = L / len(plan), recall R = L / len(gold) and F1 = 2PR / (P + R), which
  equals 2L / (len(plan) + len(gold)). It is 1.0 only for identical plans, so order
  matters: `[a, b]` against gold `[b, a]` scores 0.5. Two empty plans score 1.0; a
  sample without a gold plan (`None`) gets no opinion.
* `plan_validity(plans, requests)`: 1.0 if the plan is valid under the catalog for the
  request's attachments (every step's input is available in order), else 0.0. The
  catalog is the scoring host's (passed as context by `PluginHost.score_batch`), or the
  process host's when called directly. A sample without a request gets no opinion.

Requests are `{"text": ..., "attachments": [...]}` mappings or objects with an
`attachments` attribute; plans are sequences of `engine.task` strings (`None` counts as
the empty plan).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from studio_align.catalog import Catalog
from studio_align.plugins import get_host


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of `a` and `b` (O(len(a) * len(b)))."""
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def ordered_step_f1(plan: Sequence[str], gold: Sequence[str]) -> float:
    """LCS-based F1 between two step lists: 2 * LCS / (len(plan) + len(gold))."""
    if not plan and not gold:
        return 1.0
    return 2.0 * lcs_length(plan, gold) / (len(plan) + len(gold))


def _steps(plan: Any) -> list[str]:
    if plan is None:
        return []
    if isinstance(plan, str) or not isinstance(plan, Sequence):
        raise TypeError(f"a plan must be a list of step names, got {type(plan).__name__}")
    return [str(s) for s in plan]


def _attachments(request: Any) -> list[str]:
    raw = (
        request.get("attachments", ())
        if isinstance(request, dict)
        else getattr(request, "attachments", ())
    )
    return [str(getattr(a, "value", a)) for a in (raw or ())]


def intent_accuracy(plans: Sequence[Any], gold_plans: Sequence[Any]) -> list[float | None]:
    """1.0 for the exact gold plan, else ordered-step (LCS) F1 partial credit."""
    out: list[float | None] = []
    for plan, gold in zip(plans, gold_plans, strict=True):
        if gold is None:
            out.append(None)
            continue
        p, g = _steps(plan), _steps(gold)
        out.append(1.0 if p == g else ordered_step_f1(p, g))
    return out


def plan_validity(
    plans: Sequence[Any], requests: Sequence[Any], catalog: Catalog | None = None
) -> list[float | None]:
    """1.0 if the plan is valid under the catalog for the request's attachments, else 0.0."""
    if catalog is None:
        catalog = get_host().catalog
    out: list[float | None] = []
    for plan, request in zip(plans, requests, strict=True):
        if request is None:
            out.append(None)
            continue
        out.append(1.0 if catalog.is_valid(_steps(plan), _attachments(request)) else 0.0)
    return out
