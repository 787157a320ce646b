"""The autotune loop's records: its options, the ledger replayed into an index, and the
summary it returns (and writes into the report)."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from studio_align.autotune.proposers import Proposer
from studio_align.autotune.space import Config
from studio_align.errors import StudioAlignError

FAILURES = ("crash", "timeout", "nan")
STATUSES = ("keep", "discard", *FAILURES)


@dataclass
class LoopOptions:
    proposer: str | Proposer = "tpe"  # a name from PROPOSERS, or any Proposer object
    resume: bool = False
    trials: int | None = None  # overrides budget.trials
    wall_clock_s: float | None = None  # overrides budget.wall_clock_s
    git: bool = False
    git_repo: str | Path = "."
    git_branch: str | None = None
    agent_wait_s: float = 3600.0
    confirm: bool = True
    report: bool = True
    log: Callable[[str], None] | None = None


@dataclass
class Summary:
    out: str
    metric: str
    direction: str
    baseline_mean: float | None = None
    baseline_std: float | None = None
    sigma: float | None = None
    best_trial: int | None = None
    best_config: Config = field(default_factory=dict)
    best_mean: float | None = None
    best_std: float | None = None
    best_seeds: list[int] = field(default_factory=list)
    heldout: dict[str, Any] = field(default_factory=dict)  # trial -> {mean, std, values}
    counts: dict[str, int] = field(default_factory=dict)
    trials: int = 0
    stopped: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _State:
    """Everything the ledger says so far, indexed for the loop."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.header: dict[str, Any] | None = None
        self.proposals: dict[int, dict[str, Any]] = {}
        self.runs: dict[tuple[int, int, str], dict[str, Any]] = {}
        self.trials: dict[int, dict[str, Any]] = {}
        self.confirms: dict[int, dict[str, Any]] = {}
        for r in records:
            kind = r["kind"]
            if kind == "header":
                self.header = r
            elif kind == "propose":
                self.proposals[r["trial"]] = r
            elif kind == "run":
                self.runs[(r["trial"], r["seed"], r["split"])] = r
            elif kind == "trial":
                self.trials[r["trial"]] = r
            elif kind == "confirm":
                self.confirms[r["trial"]] = r

    def best(self) -> dict[str, Any]:
        """The current best trial: the last kept one (each keep beat the previous best)."""
        kept = [t for t in self.trials.values() if t["status"] in ("baseline", "keep")]
        return max(kept, key=lambda t: t["trial"])

    def elapsed(self) -> float:
        return sum(r.get("seconds", 0.0) for r in self.runs.values())


def build_summary(
    state: _State, out: str, metric: Any, sigma: float | None, *, stopped: str = ""
) -> Summary:
    """What the loop reports: baseline, best, noise, counts by status, held-out checks."""
    s = Summary(out, metric.name, metric.direction, stopped=stopped)
    if 0 in state.trials and state.trials[0]["status"] == "baseline":
        b = state.trials[0]
        s.baseline_mean, s.baseline_std, s.sigma = b["mean"], b["std"], sigma
        best = state.best()
        s.best_trial, s.best_config = best["trial"], best["config"]
        s.best_mean, s.best_std, s.best_seeds = best["mean"], best["std"], best["seeds"]
    s.counts = {k: 0 for k in STATUSES}
    for t, rec in state.trials.items():
        if t > 0:
            s.counts[rec["status"]] = s.counts.get(rec["status"], 0) + 1
    s.trials = sum(1 for t in state.trials if t > 0)
    s.heldout = {
        str(t): {k: c[k] for k in ("mean", "std", "values", "seeds")}
        for t, c in state.confirms.items()
    }
    return s


@contextlib.contextmanager
def lock_dir(out: Path) -> Iterator[None]:
    """Hold an exclusive lock on `out` (one loop per output directory)."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / ".lock").open("w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StudioAlignError(f"{out}: another autotune loop is running here") from None
        yield


def config_toml(space: Any, record: dict[str, Any]) -> str:
    """The kept config as TOML: locked keys and parameters, each a `--set` key."""
    head = (
        f"# {space.name} trial {record['trial']} ({record['status']}): "
        f"{space.metric.name} = {record['mean']:.6g}\n"
        "# each key is a --set override on top of the base config\n"
    )
    return head + tomli_w.dumps({**space.locked, **record["config"]})
