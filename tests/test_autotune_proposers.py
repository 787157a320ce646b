"""Proposers: determinism per trial (resume-safe), hill moves, TPE learning from failures."""

from __future__ import annotations

from autotune_helpers import write_space

from studio_align.autotune import History, Space, make_proposer


def _history(space):
    return History(baseline=space.baseline(), best=space.baseline(), best_mean=0.8)


def test_random_sobol_hill_are_pure_functions_of_the_trial(tmp_path):
    space = Space.load(write_space(tmp_path))
    for name in ("random", "sobol", "hill"):
        a = make_proposer(name, space, tmp_path, seed=3)
        b = make_proposer(name, space, tmp_path, seed=3)  # a fresh one, as after a restart
        for trial in (5, 1, 9):
            assert (
                a.propose(trial, _history(space)).config == b.propose(trial, _history(space)).config
            )


def test_hill_moves_one_or_two_parameters_of_the_best(tmp_path):
    space = Space.load(write_space(tmp_path))
    hill = make_proposer("hill", space, tmp_path)
    best = space.complete({"x": 0.6, "lr": 0.01, "layers": 4})
    history = History(baseline=space.baseline(), best=best)
    for trial in range(1, 30):
        config = hill.propose(trial, history).config
        changed = {k for k in set(config) | set(best) if config.get(k) != best.get(k)}
        assert changed and len(changed - {"momentum"}) <= 2, changed
        assert space.complete(config, strict=True) == config


def test_tpe_counts_failures_as_the_worst_value(tmp_path):
    space = Space.load(write_space(tmp_path))
    tpe = make_proposer("tpe", space, tmp_path)
    tpe.tell(0, space.baseline(), 0.8, "baseline")
    p = tpe.propose(1, _history(space))
    tpe.tell(1, p.config, 0.9, "discard")
    p = tpe.propose(2, _history(space))
    tpe.tell(2, p.config, None, "crash")
    values = [t.value for t in tpe.study.trials]
    assert values == [0.8, 0.9, 0.8]  # the crash is told as the worst success so far
