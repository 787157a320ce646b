"""Rewards: what a reward is and how it is called.

A reward is a callable that takes keyword arguments named after batch columns
(`requests`, `plans`, `gold_plans`, `images`, `prompts`, `creators`, or any extra column
of the dataset) and returns one number per sample, `None` meaning "no opinion".

Design choices:

* Only the arguments a reward names are passed, so the host can add columns without
  breaking rewards; a reward with `**kwargs` receives every column. A named argument
  the batch lacks is an error, unless the parameter has a default.
* **A reward cannot hang or end the run.** Each call has a time-out: a run config's
  `[reward_call]` (`RewardCallConfig`) `per_reward` limit, else the plugin's own
  `Reward.timeout_s`, else `timeout_s` (default 60 s).
* No numpy here: the plugin host builds `Reward`s while every command starts, and the
  batched scoring call (`studio_align.scoring`) is imported by what scores.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import Field, PositiveFloat

from studio_align.config import Strict
from studio_align.errors import ConfigError, RewardError

_NO_DEFAULT = inspect.Parameter.empty
DEFAULT_TIMEOUT_S = 60.0


class RewardCallConfig(Strict):
    """`[reward_call]`: how long one reward call may take; an overrun stops the run, naming it."""

    timeout_s: float | None = Field(DEFAULT_TIMEOUT_S, gt=0)  # seconds per reward call
    per_reward: dict[str, PositiveFloat] = Field(
        default_factory=dict, description="reward name -> seconds; overrides timeout_s"
    )

    def apply(self, rewards: Mapping[str, Reward]) -> dict[str, Reward]:
        """`rewards` with the `per_reward` limits set; a name not among them is an error."""
        unknown = sorted(set(self.per_reward) - set(rewards))
        if unknown:
            raise ConfigError(
                f"reward_call.per_reward: {unknown} not in [rewards] {sorted(rewards)}"
            )
        own = self.per_reward
        return {n: replace(r, timeout_s=own[n]) if n in own else r for n, r in rewards.items()}


@dataclass(frozen=True)
class Reward:
    """A named reward function (see the module docstring for the calling convention)."""

    name: str
    fn: Callable[..., Any]
    description: str = ""
    plugin: str | None = None
    timeout_s: float | None = None  # overrides the call's time-out for this reward
    _params: tuple[tuple[str, bool], ...] = field(default=(), init=False, repr=False, compare=False)
    _takes_all: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise RewardError(f"reward name must be a non-empty string, got {self.name!r}")
        if not callable(self.fn):
            raise RewardError(
                f"reward {self.name!r}: fn must be callable, got {type(self.fn).__name__}"
            )
        try:
            sig = inspect.signature(self.fn)
        except (TypeError, ValueError) as e:
            raise RewardError(f"reward {self.name!r}: cannot read its signature: {e}") from e
        params: list[tuple[str, bool]] = []
        takes_all = False
        for p in sig.parameters.values():
            if p.kind is p.VAR_KEYWORD:
                takes_all = True
            elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                params.append((p.name, p.default is _NO_DEFAULT))
            elif p.kind is p.POSITIONAL_ONLY and p.default is _NO_DEFAULT:
                raise RewardError(
                    f"reward {self.name!r}: positional-only parameter {p.name!r} cannot be "
                    "passed by column name"
                )
        object.__setattr__(self, "_params", tuple(params))
        object.__setattr__(self, "_takes_all", takes_all)

    @property
    def label(self) -> str:
        """`reward 'x'` or `reward 'x' (plugin p)`, for error messages."""
        return f"reward {self.name!r}" + (f" (plugin {self.plugin})" if self.plugin else "")

    @property
    def columns(self) -> tuple[str, ...]:
        """Argument names the reward accepts (all columns if it takes `**kwargs`)."""
        return tuple(name for name, _ in self._params)

    @property
    def required_columns(self) -> tuple[str, ...]:
        """Argument names without a default: the batch must provide these."""
        return tuple(name for name, required in self._params if required)

    def arguments(self, available: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments to call `fn` with, chosen from `available` by name."""
        if self._takes_all:
            return dict(available)
        missing = [n for n in self.required_columns if n not in available]
        if missing:
            raise RewardError(
                f"{self.label} needs column(s) {', '.join(map(repr, missing))} that the batch "
                f"does not have (available: {', '.join(sorted(available)) or 'none'})"
            )
        return {n: available[n] for n in self.columns if n in available}


RewardsArg = Mapping[str, Reward] | Iterable[Reward | Callable[..., Any]]


def as_rewards(rewards: RewardsArg) -> dict[str, Reward]:
    """Normalise a mapping or list of `Reward`s (or bare callables) to `{name: Reward}`."""
    items = rewards.values() if isinstance(rewards, Mapping) else rewards
    out: dict[str, Reward] = {}
    for r in items:
        reward = r if isinstance(r, Reward) else Reward(getattr(r, "__name__", repr(r)), r)
        if reward.name in out:
            raise RewardError(f"reward {reward.name!r} given twice")
        out[reward.name] = reward
    return out


def resolve_weights(names: Iterable[str], weights: Mapping[str, Any] | None) -> dict[str, float]:
    """Weight per reward: from `weights`, 1.0 when missing; unknown names are errors."""
    names = list(names)
    weights = dict(weights or {})
    unknown = sorted(set(weights) - set(names))
    if unknown:
        raise ConfigError(
            f"reward weight(s) for unknown reward(s) {', '.join(map(repr, unknown))} "
            f"(rewards in use: {', '.join(names) or 'none'})"
        )
    out = {}
    for name in names:
        w = weights.get(name, 1.0)
        if isinstance(w, bool) or not isinstance(w, numbers.Real) or not math.isfinite(w):
            raise ConfigError(f"reward weight for {name!r} must be a finite number, got {w!r}")
        out[name] = float(w)
    return out
