"""Selective prediction: risk-coverage curves and thresholds for abstaining.

A router that may abstain is judged by what it keeps: sort requests by a *keep score*
(higher = more trusted), keep the top fraction (the coverage), and measure the accuracy
of what is kept (the selective accuracy). Everything here is a pure function of lists
of scores and correctness flags, so evaluation, calibration fitting and tests share it.

Design choices:
- Ties are kept or dropped together: a threshold on a score cannot separate equal
  scores, so the curve only has points at score boundaries (what a deployed threshold
  can actually realise).
- `coverage_at` is the largest coverage whose selective accuracy reaches the target,
  scanning every boundary (selective accuracy is not monotone in coverage).
- `threshold_for` returns the score threshold realising that coverage on the data it is
  given; it is meant to be fitted on validation and applied elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

Scores = Sequence[float] | np.ndarray
Flags = Sequence[bool] | np.ndarray


def _boundaries(scores: Scores, correct: Flags) -> list[tuple[float, int, int]]:
    """(threshold, kept, kept correct) at each distinct score, highest score first."""
    s = np.asarray(scores, np.float64)
    c = np.asarray(correct, bool)
    if s.shape != c.shape:
        raise ValueError(f"{s.shape[0]} scores but {c.shape[0]} correctness flags")
    order = np.argsort(-s, kind="stable")
    s, c = s[order], c[order]
    out: list[tuple[float, int, int]] = []
    hits = 0
    for i in range(len(s)):
        hits += int(c[i])
        if i == len(s) - 1 or s[i + 1] < s[i]:
            out.append((float(s[i]), i + 1, hits))
    return out


def risk_coverage(scores: Scores, correct: Flags, *, points: int = 21) -> list[dict[str, float]]:
    """The risk-coverage curve, thinned to about `points` points (always the full-coverage
    end): each point has `coverage`, `selective_accuracy`, `risk` and `threshold`."""
    n = len(scores)
    if n == 0:
        return []
    bounds = _boundaries(scores, correct)
    step = max(1, len(bounds) // max(1, points - 1))
    picked = bounds[::step]
    if picked[-1] is not bounds[-1]:
        picked.append(bounds[-1])
    return [
        {
            "coverage": kept / n,
            "selective_accuracy": hits / kept,
            "risk": 1.0 - hits / kept,
            "threshold": thr,
        }
        for thr, kept, hits in picked
    ]


def coverage_at(scores: Scores, correct: Flags, target: float = 0.95) -> float:
    """Largest fraction kept whose accuracy is at least `target` (0.0 if none is)."""
    n = len(scores)
    best = 0.0
    for _, kept, hits in _boundaries(scores, correct):
        if hits / kept >= target:
            best = max(best, kept / n)
    return best


def threshold_for(scores: Scores, correct: Flags, target: float = 0.95) -> float:
    """Score threshold (keep when score >= it) realising `coverage_at` on this data; above
    the highest score (keep nothing) when no coverage reaches the target."""
    best_thr, best_cov = float("inf"), 0.0
    n = len(scores)
    for thr, kept, hits in _boundaries(scores, correct):
        if hits / kept >= target and kept / n > best_cov:
            best_thr, best_cov = thr, kept / n
    return best_thr


def selective_summary(scores: Scores, correct: Flags, *, target: float = 0.95) -> dict[str, Any]:
    """Figures for a report: the curve, coverage at `target`, and the area under the
    risk-coverage curve (AURC: mean risk over all coverages, lower is better)."""
    bounds = _boundaries(scores, correct)
    n = len(scores)
    aurc, prev = 0.0, 0
    for _, kept, hits in bounds:
        aurc += (kept - prev) / n * (1.0 - hits / kept)
        prev = kept
    return {
        "target_accuracy": target,
        "coverage_at_target": coverage_at(scores, correct, target),
        "aurc": aurc if n else float("nan"),
        "curve": risk_coverage(scores, correct),
    }
