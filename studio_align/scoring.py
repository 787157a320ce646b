"""The batched scoring call: every reward over one batch, checked, weighted and summed.

Design choices:

* Besides per-sample columns, `score_batch` takes a `context` of batch-wide values
  (the engine `catalog`, say) that are passed by the same naming rule as columns
  (`studio_align.rewards`).
* `async def` rewards (anything returning an awaitable) are awaited concurrently with
  `asyncio.gather` after the synchronous ones have run.
* Outputs are checked strictly: an exception, a wrong length, NaN/inf or a non-number
  raises `RewardError` naming the reward and the plugin that registered it.
* `None` becomes NaN in the per-reward array; the combined total is the weighted sum
  over the rewards that have an opinion on that sample (0.0 if none has).
* Metrics per reward: mean and std over samples with an opinion (0.0 when no sample has
  one) and the fraction of `None`; plus mean and std of the total.
* Time-outs (`RewardCallConfig`, `Reward.timeout_s`, `timeout_s`): a synchronous reward
  runs in a daemon thread, abandoned when it overruns (Python cannot kill a thread); an
  async one is cancelled. Overrunning raises `RewardError` naming the reward and its
  plugin; so does `sys.exit()` inside a reward, which would otherwise end the process
  silently.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import math
import numbers
import threading
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from studio_align.errors import RewardError
from studio_align.rewards import (
    DEFAULT_TIMEOUT_S,
    Reward,
    RewardsArg,
    as_rewards,
    resolve_weights,
)


@dataclass
class RewardScores:
    """Result of `score_batch`: combined totals, per-reward arrays (NaN = None), metrics."""

    total: np.ndarray
    per_reward: dict[str, np.ndarray]
    metrics: dict[str, float]
    weights: dict[str, float]


def _batch_size(columns: Mapping[str, Any], size: int | None) -> int:
    n = size
    for key, col in columns.items():
        try:
            length = len(col)
        except TypeError:
            raise RewardError(f"column {key!r} has no length ({type(col).__name__})") from None
        if n is None:
            n = length
        elif length != n:
            raise RewardError(f"column {key!r} has {length} rows, expected {n}")
    if n is None:
        raise RewardError("score_batch: no columns given; pass size= for the number of samples")
    return n


def _to_array(reward: Reward, out: Any, n: int) -> np.ndarray:
    """Check one reward's output and convert it to float64 with NaN for None."""
    if isinstance(out, (str, bytes, Mapping)) or out is None:
        raise RewardError(
            f"{reward.label} returned {type(out).__name__}, expected a sequence of {n} numbers"
        )
    if not isinstance(out, (list, tuple)) and hasattr(out, "__array__"):
        out = np.asarray(out)
    if isinstance(out, np.ndarray) and out.ndim != 1:
        raise RewardError(f"{reward.label} returned an array of shape {out.shape}, expected ({n},)")
    try:
        values = list(out)
    except TypeError:
        raise RewardError(
            f"{reward.label} returned {type(out).__name__}, expected a sequence of {n} numbers"
        ) from None
    if len(values) != n:
        raise RewardError(f"{reward.label} returned {len(values)} values for a batch of {n}")
    arr = np.empty(n, dtype=np.float64)
    for i, v in enumerate(values):
        if v is None:
            arr[i] = np.nan
            continue
        if not isinstance(v, (numbers.Real, np.bool_)):
            raise RewardError(
                f"{reward.label} returned a non-number at sample {i}: {type(v).__name__} {v!r:.60}"
            )
        x = float(v)
        if not math.isfinite(x):
            raise RewardError(f"{reward.label} returned {x} at sample {i}")
        arr[i] = x
    return arr


def _combine(
    rewards: dict[str, Reward], outputs: dict[str, Any], weights: dict[str, float], n: int
) -> RewardScores:
    per_reward = {name: _to_array(rewards[name], outputs[name], n) for name in rewards}
    total = np.zeros(n, dtype=np.float64)
    metrics: dict[str, float] = {}
    for name, arr in per_reward.items():
        opinion = ~np.isnan(arr)
        total += np.where(opinion, arr * weights[name], 0.0)
        seen = arr[opinion]
        metrics[f"reward/{name}/mean"] = float(seen.mean()) if seen.size else 0.0
        metrics[f"reward/{name}/std"] = float(seen.std()) if seen.size else 0.0
        metrics[f"reward/{name}/none_frac"] = float(1.0 - opinion.mean()) if n else 0.0
    metrics["reward/total/mean"] = float(total.mean()) if n else 0.0
    metrics["reward/total/std"] = float(total.std()) if n else 0.0
    return RewardScores(total=total, per_reward=per_reward, metrics=metrics, weights=weights)


def _limit(reward: Reward, timeout_s: float | None) -> float | None:
    return reward.timeout_s if reward.timeout_s is not None else timeout_s


def _failed(reward: Reward, e: BaseException) -> BaseException:
    """The `RewardError` for an exception a reward raised (others pass through)."""
    if isinstance(e, RewardError):
        return e
    if isinstance(e, SystemExit):
        return RewardError(f"{reward.label} called sys.exit({e.code!r})")
    if isinstance(e, Exception):
        return RewardError(f"{reward.label} raised {type(e).__name__}: {e}")
    return e


def _call(reward: Reward, kwargs: dict[str, Any], timeout_s: float | None) -> Any:
    """Call a reward; with a time-out, in a daemon thread that is abandoned if it overruns."""
    if timeout_s is None:
        try:
            return reward.fn(**kwargs)
        except (Exception, SystemExit) as e:
            raise _failed(reward, e) from e
    box: dict[str, Any] = {}
    finished = threading.Event()

    def run() -> None:
        try:
            box["out"] = reward.fn(**kwargs)
        except BaseException as e:
            box["err"] = e
        finally:
            finished.set()

    threading.Thread(target=run, name=f"reward-{reward.name}", daemon=True).start()
    if not finished.wait(timeout_s):
        raise RewardError(f"{reward.label} timed out after {timeout_s:g} s")
    if "err" in box:
        raise _failed(reward, box["err"]) from box["err"]
    return box["out"]


def _start(
    rewards: dict[str, Reward], available: Mapping[str, Any], timeout_s: float | None
) -> tuple[dict[str, Any], dict[str, Awaitable[Any]]]:
    """Call every reward; sync results come back at once, async ones as awaitables."""
    done: dict[str, Any] = {}
    pending: dict[str, Awaitable[Any]] = {}
    try:
        for name, reward in rewards.items():
            kwargs = reward.arguments(available)
            out = _call(reward, kwargs, _limit(reward, timeout_s))
            if inspect.isawaitable(out):
                pending[name] = out
            else:
                done[name] = out
    except BaseException:
        for aw in pending.values():
            if inspect.iscoroutine(aw):
                aw.close()
        raise
    return done, pending


async def _guarded(reward: Reward, aw: Awaitable[Any], timeout_s: float | None) -> Any:
    """Await one async reward in this task (so `SystemExit` is caught here), time-limited."""
    try:
        async with asyncio.timeout(timeout_s):
            return await aw
    except TimeoutError:
        raise RewardError(f"{reward.label} timed out after {timeout_s:g} s") from None
    except SystemExit as e:
        raise _failed(reward, e) from e


async def _gather(
    rewards: dict[str, Reward], pending: dict[str, Awaitable[Any]], timeout_s: float | None
) -> dict[str, Any]:
    names = list(pending)
    results = await asyncio.gather(
        *(_guarded(rewards[n], pending[n], _limit(rewards[n], timeout_s)) for n in names),
        return_exceptions=True,
    )
    out: dict[str, Any] = {}
    for name, res in zip(names, results, strict=True):
        if isinstance(res, BaseException):
            raise _failed(rewards[name], res) from res
        out[name] = res
    return out


def _prepare(
    rewards: RewardsArg,
    weights: Mapping[str, Any] | None,
    columns: Mapping[str, Sequence[Any]] | None,
    context: Mapping[str, Any] | None,
    size: int | None,
) -> tuple[dict[str, Reward], dict[str, float], dict[str, Any], int]:
    rs = as_rewards(rewards)
    w = resolve_weights(rs, weights)
    columns = dict(columns or {})
    n = _batch_size(columns, size)
    context = dict(context or {})
    clash = sorted(set(columns) & set(context))
    if clash:
        raise RewardError(f"names given both as columns and as context: {', '.join(clash)}")
    return rs, w, {**context, **columns}, n


def score_batch(
    rewards: RewardsArg,
    weights: Mapping[str, Any] | None = None,
    columns: Mapping[str, Sequence[Any]] | None = None,
    *,
    context: Mapping[str, Any] | None = None,
    size: int | None = None,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
) -> RewardScores:
    """Score one batch with every reward and combine them with `weights`.

    `columns` maps column names to per-sample sequences of equal length; `context` holds
    batch-wide values passed by the same naming rule. Safe to call from inside a running
    event loop (async rewards then run on a helper thread); from async code prefer
    `score_batch_async`.
    """
    rs, w, available, n = _prepare(rewards, weights, columns, context, size)
    done, pending = _start(rs, available, timeout_s)
    if pending:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            done.update(asyncio.run(_gather(rs, pending, timeout_s)))
        else:
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                done.update(pool.submit(asyncio.run, _gather(rs, pending, timeout_s)).result())
    return _combine(rs, done, w, n)


async def score_batch_async(
    rewards: RewardsArg,
    weights: Mapping[str, Any] | None = None,
    columns: Mapping[str, Sequence[Any]] | None = None,
    *,
    context: Mapping[str, Any] | None = None,
    size: int | None = None,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
) -> RewardScores:
    """`score_batch` for callers already inside an event loop."""
    rs, w, available, n = _prepare(rewards, weights, columns, context, size)
    done, pending = _start(rs, available, timeout_s)
    if pending:
        done.update(await _gather(rs, pending, timeout_s))
    return _combine(rs, done, w, n)


def score_registered(
    host: Any,
    rewards: Mapping[str, float] | Sequence[str],
    columns: Mapping[str, Sequence[Any]],
    *,
    context: Mapping[str, Any] | None = None,
    size: int | None = None,
) -> RewardScores:
    """Score with a plugin host's rewards chosen by name: `{name: weight}` or `[name, ...]`.

    The host's `catalog` is offered to rewards as context unless given; an unknown name
    is an error listing the registered ones.
    """
    weights = dict(rewards) if isinstance(rewards, Mapping) else None
    selected = host.select_rewards(rewards)
    ctx = {"catalog": host.catalog, **(context or {})}
    return score_batch(selected, weights, columns, context=ctx, size=size)
