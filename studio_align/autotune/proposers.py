"""Proposers: where the next trial's config comes from.

All share one small interface, `propose(trial, history) -> Proposal | None` and
`tell(trial, config, value, status)`, so the loop, ledger and acceptance rule are the same
whichever drives the search:

- `random`: uniform in the unit cube (log ranges uniform in log space), seeded per trial.
- `sobol`: the trial-th point of a scrambled Sobol sequence (scipy.stats.qmc); covers the
  cube more evenly than random for small budgets.
- `tpe`: optuna's TPESampler through the ask/tell API (no sampler of our own); conditional
  parameters are suggested only when active (define-by-run); failed trials count as the
  worst value seen, so it steers away from regions that crash.
- `hill`: perturb one or two parameters of the current best by a Gaussian step in unit
  space (choices jump to another value).
- `agent`: an external coding agent. The loop writes `program.md` (the arena and the
  protocol) and `agent/request.json`, then waits for `agent/trial-NNNN.toml`.

random, sobol and hill are pure functions of (seed, trial, history), so a resumed loop
proposes exactly what an uninterrupted one would; TPE is rebuilt on resume by replaying
the ledger into its study.
"""

from __future__ import annotations

import json
import time
import tomllib
import warnings
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from studio_align.autotune.history import History, Proposal
from studio_align.autotune.program import write_program
from studio_align.autotune.space import Config, Param, Space, _flatten, _fmt
from studio_align.errors import ConfigError

PROPOSERS = ("tpe", "random", "sobol", "hill", "agent")


class Proposer(Protocol):
    name: str

    def propose(self, trial: int, history: History) -> Proposal | None: ...

    def tell(self, trial: int, config: Config, value: float | None, status: str) -> None: ...


class _Stateless:
    name = "stateless"

    def tell(self, trial: int, config: Config, value: float | None, status: str) -> None:
        pass


class RandomProposer(_Stateless):
    name = "random"

    def __init__(self, space: Space, seed: int = 0) -> None:
        self.space, self.seed = space, seed

    def propose(self, trial: int, history: History) -> Proposal:
        u = np.random.default_rng([self.seed, trial]).random(len(self.space.params))
        config = self.space.from_units(dict(zip(self.space.params, u, strict=True)))
        return Proposal(config, f"random: {self.space.diff(config, history.baseline)}")


class SobolProposer(_Stateless):
    name = "sobol"

    def __init__(self, space: Space, seed: int = 0) -> None:
        self.space, self.seed = space, seed

    def propose(self, trial: int, history: History) -> Proposal:
        from scipy.stats import qmc

        engine = qmc.Sobol(d=max(1, len(self.space.params)), scramble=True, seed=self.seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # balance warning for non-power-of-2 draws
            if trial > 1:
                engine.fast_forward(trial - 1)
            u = engine.random(1)[0]
        config = self.space.from_units(dict(zip(self.space.params, u, strict=False)))
        return Proposal(config, f"sobol: {self.space.diff(config, history.baseline)}")


class HillProposer(_Stateless):
    """Local search around the current best; `step` is the std of a move in unit space."""

    name = "hill"

    def __init__(self, space: Space, seed: int = 0, step: float = 0.15) -> None:
        self.space, self.seed, self.step = space, seed, step

    def propose(self, trial: int, history: History) -> Proposal:
        rng = np.random.default_rng([self.seed, trial, 7])
        best = history.best
        for _ in range(20):
            keys = [k for k in self.space.params if k in best]
            if not keys:
                break
            n = 2 if len(keys) > 1 and rng.random() < 0.3 else 1
            chosen = list(rng.choice(keys, size=n, replace=False))
            partial = dict(best)
            for key in chosen:
                partial[key] = self._move(self.space.params[key], best[key], rng)
            config = self.space.complete(partial)
            if config != best:
                changes = ", ".join(
                    f"{k} {_fmt(best.get(k))}->{_fmt(config.get(k))}" for k in chosen
                )
                return Proposal(config, f"hill: {changes}")
        config = self.space.baseline()
        return Proposal(config, "hill: no move possible, baseline")

    def _move(self, p: Param, value: Any, rng: np.random.Generator) -> Any:
        if p.type == "choice":
            assert p.values
            others = [v for v in p.values if v != value]
            return others[int(rng.integers(len(others)))] if others else value
        u = p.to_unit(value) + rng.normal(0.0, self.step)
        new = p.from_unit(u)
        if p.type == "int" and new == value:  # a step too small to round away: move by one
            assert p.low is not None and p.high is not None
            up = value + 1 if value + 1 <= p.high else value - 1
            down = value - 1 if value - 1 >= p.low else value + 1
            new = up if u >= p.to_unit(value) else down
        return new


class TPEProposer:
    """optuna's TPESampler via ask/tell; the ledger is replayed into the study on resume."""

    name = "tpe"

    def __init__(self, space: Space, seed: int = 0, n_startup_trials: int = 5) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        self.space = space
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # multivariate/group are "experimental"
            sampler = optuna.samplers.TPESampler(
                seed=seed,
                n_startup_trials=n_startup_trials,
                multivariate=True,
                group=True,
            )
        self.study = optuna.create_study(direction=space.metric.direction, sampler=sampler)
        self._pending: dict[int, Any] = {}
        self._seen: list[float] = []

    def _distribution(self, p: Param) -> Any:
        d = self._optuna.distributions
        if p.type == "choice":
            return d.CategoricalDistribution(p.values)  # type: ignore[arg-type]
        assert p.low is not None and p.high is not None
        if p.type == "int":
            return d.IntDistribution(int(p.low), int(p.high), log=p.log)
        return d.FloatDistribution(p.low, p.high, log=p.log)

    def propose(self, trial: int, history: History) -> Proposal:
        t = self.study.ask()
        config: Config = {}
        for key, p in self.space.params.items():
            if self.space.is_active(key, config):
                config[key] = _suggest(t, key, p)
        self._pending[trial] = t
        return Proposal(config, f"tpe: {self.space.diff(config, history.baseline)}")

    def tell(self, trial: int, config: Config, value: float | None, status: str) -> None:
        """Report a finished trial. A crash, timeout or NaN is told as the worst value seen
        so far (optuna would otherwise ignore failed trials and keep sampling the region
        that fails); before any success it is a FAIL."""
        state = self._optuna.trial.TrialState
        ok = value is not None and status in ("keep", "discard", "baseline")
        if ok:
            assert value is not None
            self._seen.append(value)
        elif self._seen:
            worst = min if self.space.metric.direction == "maximize" else max
            value, ok = worst(self._seen), True
        t = self._pending.pop(trial, None)
        if t is not None:
            if ok:
                self.study.tell(t, value)
            else:
                self.study.tell(t, state=state.FAIL)
            return
        dists = {k: self._distribution(self.space.params[k]) for k in config}
        self.study.add_trial(
            self._optuna.trial.create_trial(
                params=dict(config),
                distributions=dists,
                value=value if ok else None,
                state=state.COMPLETE if ok else state.FAIL,
            )
        )


def _suggest(t: Any, key: str, p: Param) -> Any:
    if p.type == "choice":
        return t.suggest_categorical(key, p.values)
    assert p.low is not None and p.high is not None
    if p.type == "int":
        return t.suggest_int(key, int(p.low), int(p.high), log=p.log)
    return t.suggest_float(key, p.low, p.high, log=p.log)


class AgentProposer(_Stateless):
    """Take each trial's config from a file an external coding agent writes.

    Protocol (also written to `program.md`): the loop writes `agent/request.json` naming
    the trial and the file to write; the agent writes `agent/trial-NNNN.toml` (parameter
    keys with values, optional `description`). A rejected file is renamed to
    `.rejected` with the reason in `agent/trial-NNNN.error.txt`, and the loop waits for
    a corrected one. If nothing arrives within `wait_s`, the loop stops cleanly and can be
    resumed later."""

    name = "agent"

    def __init__(
        self, space: Space, out: str | Path, *, wait_s: float = 3600.0, poll_s: float = 0.2
    ) -> None:
        self.space = space
        self.out = Path(out)
        self.dir = self.out / "agent"
        self.wait_s, self.poll_s = wait_s, poll_s

    def proposal_path(self, trial: int) -> Path:
        return self.dir / f"trial-{trial:04d}.toml"

    def propose(self, trial: int, history: History) -> Proposal | None:

        self.dir.mkdir(parents=True, exist_ok=True)
        write_program(self.space, self.out, history)
        path = self.proposal_path(trial)
        request = {
            "trial": trial,
            "write": str(path.relative_to(self.out)),
            "baseline": history.baseline,
            "best": history.best,
            "best_mean": history.best_mean,
        }
        tmp = self.dir / "request.json.tmp"
        tmp.write_text(json.dumps(request, indent=2) + "\n")
        tmp.replace(self.dir / "request.json")
        deadline = time.monotonic() + self.wait_s
        while time.monotonic() < deadline:
            if path.exists():
                time.sleep(self.poll_s)  # let a writer that does not rename finish
                try:
                    data = tomllib.loads(path.read_text(encoding="utf-8"))
                except tomllib.TOMLDecodeError as e:
                    self._reject(trial, f"invalid TOML: {e}")
                    continue
                description = str(data.pop("description", "")) or "agent"
                try:
                    config = self.space.complete(_flatten(data), strict=True)
                except ConfigError as e:
                    self._reject(trial, str(e))
                    continue
                return Proposal(config, f"agent: {description}")
            time.sleep(self.poll_s)
        return None

    def _reject(self, trial: int, reason: str) -> None:
        """Move the rejected file aside, then write the reason whole (a rename): an agent
        that sees `error.txt` reads all of it, and may write the corrected file at once
        without the loop moving that one aside too."""
        path = self.proposal_path(trial)
        path.replace(path.with_suffix(".toml.rejected"))
        tmp = self.dir / f"trial-{trial:04d}.error.txt.tmp"
        tmp.write_text(reason + "\n")
        tmp.replace(self.dir / f"trial-{trial:04d}.error.txt")


def make_proposer(
    name: str, space: Space, out: str | Path, *, seed: int = 0, agent_wait_s: float = 3600.0
) -> Proposer:
    if name == "tpe":
        return TPEProposer(space, seed)
    if name == "random":
        return RandomProposer(space, seed)
    if name == "sobol":
        return SobolProposer(space, seed)
    if name == "hill":
        return HillProposer(space, seed)
    if name == "agent":
        return AgentProposer(space, out, wait_s=agent_wait_s)
    raise ConfigError(f"--proposer {name!r}: expected one of {', '.join(PROPOSERS)}")
