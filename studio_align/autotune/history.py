"""What a proposer sees and returns: the trial history and a proposal.

Its own module because both the proposers and the program writer (`program.py`, which
the proposers import) read `History`; here neither depends on the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from studio_align.autotune.space import Config


@dataclass
class Proposal:
    config: Config
    description: str


@dataclass
class History:
    """What a proposer may look at: baseline, current best, finished trial records."""

    baseline: Config
    best: Config
    best_mean: float | None = None
    trials: list[dict[str, Any]] = field(default_factory=list)
