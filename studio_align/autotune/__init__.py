"""Autotune: the experiment loop (search space, proposers, runner, acceptance, ledger).

A space TOML declares what may change, the metric and the budget; `run_autotune` proposes
configs, trains and evaluates each as subprocesses, keeps a change only when it beats the
best by more than seed noise, records everything in a resumable ledger and confirms the
final best once on a held-out split.
"""

from studio_align.autotune.acceptance import Decision, decide, pooled_std
from studio_align.autotune.ledger import GitRecorder, Ledger
from studio_align.autotune.loop import Autotune, LoopOptions, Summary, run_autotune
from studio_align.autotune.proposers import PROPOSERS, History, Proposal, make_proposer
from studio_align.autotune.runner import Runner, RunResult
from studio_align.autotune.space import Param, Space

__all__ = [
    "PROPOSERS",
    "Autotune",
    "Decision",
    "GitRecorder",
    "History",
    "Ledger",
    "LoopOptions",
    "Param",
    "Proposal",
    "RunResult",
    "Runner",
    "Space",
    "Summary",
    "decide",
    "make_proposer",
    "pooled_std",
    "run_autotune",
]
