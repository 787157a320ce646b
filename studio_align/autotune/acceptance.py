"""Noise-aware acceptance: keep a change only when it beats the best by more than noise.

A single run of a stochastic trainer moves with its seed; greedy loops that keep any
candidate scoring above the best end up "finding" seed changes. Here the baseline runs
on several seeds, which estimates the run-to-run standard deviation sigma (pooled with
every later configuration that ran on two or more seeds). A candidate's improvement
`d = sign * (mean(candidate) - mean(best))` is compared with

    margin = k * sigma * sqrt(1 / n_best + 1 / n_candidate)

(k standard errors of a difference of two means). `d > margin`: keep. `0 < d <= margin`:
too close to call, so the candidate runs on another seed and is decided again; when the
extra seeds are used up it is discarded. `d <= 0`: discard.

All functions are pure, so the rule is tested without running any training.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Decision:
    verdict: str  # keep | discard | rerun
    diff: float  # signed improvement over the best (positive is better)
    margin: float
    sigma: float


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (None for a single value)."""
    m = statistics.fmean(values)
    return m, (statistics.stdev(values) if len(values) > 1 else None)


def pooled_std(groups: Iterable[Sequence[float]], *, min_std: float = 0.0) -> float:
    """sqrt(sum((n_i - 1) s_i^2) / sum(n_i - 1)) over groups with two or more values."""
    num = dof = 0.0
    for g in groups:
        if len(g) >= 2:
            num += (len(g) - 1) * statistics.variance(g)
            dof += len(g) - 1
    sigma = math.sqrt(num / dof) if dof else 0.0
    return max(sigma, min_std)


def margin(sigma: float, n_best: int, n_candidate: int, k: float) -> float:
    return k * sigma * math.sqrt(1.0 / n_best + 1.0 / n_candidate)


def decide(
    best: Sequence[float],
    candidate: Sequence[float],
    *,
    sigma: float,
    k: float,
    sign: float = 1.0,
    can_rerun: bool = False,
) -> Decision:
    """Keep, discard, or (when close and seeds remain) re-run the candidate on one more seed."""
    if not best or not candidate:
        raise ValueError("decide needs at least one value for the best and the candidate")
    diff = sign * (statistics.fmean(candidate) - statistics.fmean(best))
    m = margin(sigma, len(best), len(candidate), k)
    if diff > m:
        verdict = "keep"
    elif diff > 0 and can_rerun:
        verdict = "rerun"
    else:
        verdict = "discard"
    return Decision(verdict, diff, m, sigma)
