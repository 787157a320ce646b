"""Noise-aware acceptance: the pure rule, and the loop refusing a seed-only "win"."""

from __future__ import annotations

import statistics

import pytest
from autotune_helpers import write_space
from autotune_objective import score

from studio_align.autotune import LoopOptions, Proposal, Space, run_autotune
from studio_align.autotune.acceptance import critical, decide, margin, pooled_std


def test_pooled_std_weights_by_degrees_of_freedom():
    a, b = [1.0, 2.0, 3.0], [10.0, 14.0]
    expected = ((2 * statistics.variance(a) + 1 * statistics.variance(b)) / 3) ** 0.5
    assert pooled_std([a, b, [99.0]]) == pytest.approx(expected)  # singletons add nothing
    assert pooled_std([[5.0]], min_std=0.3) == 0.3


def test_decide_keep_rerun_discard():
    best = [0.50, 0.52, 0.48]
    m = margin(0.02, 3, 1, 2.0)
    assert m == pytest.approx(2 * 0.02 * (1 / 3 + 1) ** 0.5)
    assert decide(best, [0.50 + m * 1.01], sigma=0.02, k=2).verdict == "keep"
    close = [0.50 + m * 0.5]
    assert decide(best, close, sigma=0.02, k=2, can_rerun=True).verdict == "rerun"
    assert decide(best, close, sigma=0.02, k=2, can_rerun=False).verdict == "discard"
    assert decide(best, [0.49], sigma=0.02, k=2, can_rerun=True).verdict == "discard"
    # minimise: lower is better
    assert decide(best, [0.40], sigma=0.02, k=2, sign=-1.0).verdict == "keep"
    assert decide(best, [0.60], sigma=0.02, k=2, sign=-1.0).verdict == "discard"


def test_few_seeds_widen_the_margin():
    # sigma from 3 seeds (dof 2) is uncertain: k=2 becomes Student's t, ~4.5 standard errors
    assert critical(2.0, 2) == pytest.approx(4.5, abs=0.1)
    assert critical(2.0, 1000) == pytest.approx(2.0, abs=0.01)
    assert critical(2.0, None) == 2.0
    best = [0.50, 0.52, 0.48]
    lucky = [0.50 + 3 * 0.02]  # three sigma on one seed
    assert decide(best, lucky, sigma=0.02, k=2).verdict == "keep"  # a plain k rule is fooled
    assert decide(best, lucky, sigma=0.02, k=2, dof=2).verdict == "discard"


class Fixed:
    """A proposer that proposes one given config every trial (a test workload)."""

    name = "fixed"

    def __init__(self, config, description):
        self.config, self.description = config, description

    def propose(self, trial, history):
        return Proposal(dict(self.config), self.description)

    def tell(self, trial, config, value, status):
        pass


def _lucky_seed(cfg, baseline_seeds):
    """The seed whose noise makes the unchanged baseline look best on one run."""
    base = statistics.fmean(score(cfg, s, "validation", 0.0) for s in baseline_seeds)
    return max(range(3, 200), key=lambda s: score(cfg, s, "validation", 0.0)), base


def test_seed_only_change_is_not_kept(tmp_path):
    space = Space.load(write_space(tmp_path))
    cfg = {**space.baseline(), **space.locked}
    lucky, base_mean = _lucky_seed(cfg, [0, 1, 2])
    lucky_value = score(cfg, lucky, "validation", 0.0)
    assert lucky_value > base_mean  # a greedy single-run loop would keep this
    path = write_space(
        tmp_path,
        seeds={"baseline": [0, 1, 2], "candidate": [lucky], "extra": [3, 4, 5, 6]},
        budget={"trials": 1, "wall_clock_s": 600, "trial_timeout_s": 20},
    )
    space = Space.load(path)
    summary = run_autotune(
        space,
        tmp_path / "out",
        LoopOptions(
            proposer=Fixed(space.baseline(), "same config, new seed"), confirm=False, report=False
        ),
    )
    assert summary.counts["keep"] == 0 and summary.counts["discard"] == 1
    assert summary.best_trial == 0
    rows = (tmp_path / "out/results.tsv").read_text().splitlines()
    assert rows[2].split("\t")[2] == "discard"


def test_real_improvement_is_kept(tmp_path):
    # Power check for the same rule: x at its optimum is ~0.16 better, far beyond noise.
    space = Space.load(
        write_space(tmp_path, budget={"trials": 1, "wall_clock_s": 600, "trial_timeout_s": 20})
    )
    better = space.complete({"x": 0.7, "lr": 1e-2})
    summary = run_autotune(
        space,
        tmp_path / "out",
        LoopOptions(proposer=Fixed(better, "x to 0.7"), confirm=False, report=False),
    )
    assert summary.counts["keep"] == 1 and summary.best_trial == 1
    # it passed on one seed, and was confirmed on the baseline's seeds before being kept
    assert summary.best_seeds == [0, 1, 2]
