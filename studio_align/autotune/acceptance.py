"""Noise-aware acceptance: keep a change only when it beats the best by more than noise.

A single run of a stochastic trainer moves with its seed; greedy loops that keep any
candidate scoring above the best end up "finding" seed changes. Here the baseline runs
on several seeds, which estimates the run-to-run standard deviation sigma (pooled with
every later configuration that ran on two or more seeds). A candidate's improvement
`d = sign * (mean(candidate) - mean(best))` is compared with

    margin = c * sigma * sqrt(1 / n_best + 1 / n_candidate)

that is c standard errors of a difference of two means, where c is `k` (a normal
quantile, default 2) widened to Student's t with the pooled degrees of freedom: sigma
from three seeds is itself uncertain, and a lucky seed must not pass because the
baseline's seeds happened to agree. `d > margin`: keep. `0 < d <= margin`:
too close to call, so the candidate runs on another seed and is decided again; when the
extra seeds are used up it is discarded. `d <= 0`: discard.

All functions are pure, so the rule is tested without running any training.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple


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


class Noise(NamedTuple):
    """Run-to-run standard deviation and the degrees of freedom it was estimated with."""

    sigma: float
    dof: int


def estimate_noise(groups: Iterable[Sequence[float]], *, min_std: float = 0.0) -> Noise:
    """Pooled std sqrt(sum((n_i - 1) s_i^2) / sum(n_i - 1)) over groups of two or more."""
    num, dof = 0.0, 0
    for g in groups:
        if len(g) >= 2:
            num += (len(g) - 1) * statistics.variance(g)
            dof += len(g) - 1
    sigma = math.sqrt(num / dof) if dof else 0.0
    return Noise(max(sigma, min_std), dof)


def pooled_std(groups: Iterable[Sequence[float]], *, min_std: float = 0.0) -> float:
    return estimate_noise(groups, min_std=min_std).sigma


def critical(k: float, dof: int | None) -> float:
    """`k` standard errors, widened for a sigma estimated from few seeds.

    k is read as a normal quantile (k=2: one-sided 97.7%); with `dof` degrees of freedom
    the same confidence needs Student's t quantile, e.g. 4.5 instead of 2 for dof=2."""
    if not dof or k <= 0:
        return k
    from scipy.stats import norm, t

    return float(t.ppf(norm.cdf(k), dof))


def margin(sigma: float, n_best: int, n_candidate: int, k: float, dof: int | None = None) -> float:
    return critical(k, dof) * sigma * math.sqrt(1.0 / n_best + 1.0 / n_candidate)


def decide(
    best: Sequence[float],
    candidate: Sequence[float],
    *,
    sigma: float,
    k: float,
    dof: int | None = None,
    sign: float = 1.0,
    can_rerun: bool = False,
) -> Decision:
    """Keep, discard, or (when close and seeds remain) re-run the candidate on one more seed."""
    if not best or not candidate:
        raise ValueError("decide needs at least one value for the best and the candidate")
    diff = sign * (statistics.fmean(candidate) - statistics.fmean(best))
    m = margin(sigma, len(best), len(candidate), k, dof)
    if diff > m:
        verdict = "keep"
    elif diff > 0 and can_rerun:
        verdict = "rerun"
    else:
        verdict = "discard"
    return Decision(verdict, diff, m, sigma)
