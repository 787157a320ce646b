"""Step-indexed batch sources: what a train loop reads, and how resume stays exact.

Design choice: a source is a function of the step, `source(step) -> {name: array}`, not
a stateful iterator. The batch of step `s` depends only on `(seed, s)`, so the
"data-iterator position" saved in a checkpoint is just the step, and a resumed run reads
exactly the batches the uninterrupted run would have. Plain iterables are accepted too
(`as_source`); resuming one fast-forwards it by the number of batches already consumed.

Every batch of a run has the same shapes (fixed `batch_size`, fixed padded length), so
the jitted step compiles once, unless `TrimmedBatches` cuts each batch to its own padded
length (one compile per length bucket, for much less work on short examples).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

import numpy as np

from studio_align.errors import DataError

HostBatch = Mapping[str, np.ndarray]
BatchSource = Callable[[int], HostBatch]


class ModelSource(Protocol):
    """An on-policy source: the train loop calls it with the step and the current model
    (PPO's rollouts, a student's own samples); `reads_model` is True."""

    reads_model: bool

    def __call__(self, step: int, model: Any) -> HostBatch: ...


class ArrayBatches:
    """Shuffled fixed-size batches over equal-length arrays, reshuffled every epoch.

    The last partial batch of an epoch is dropped (fixed shapes). With `lengths` and
    `group` (a number of batches), batches are grouped by length (see `_grouped`). A
    `batch_size` larger than the data is refused up front (a typo, not a plan: it would repeat examples
    within one step and allocate batches the data cannot fill).
    """

    def __init__(
        self,
        arrays: Mapping[str, np.ndarray],
        batch_size: int,
        *,
        seed: int = 0,
        shuffle: bool = True,
        lengths: np.ndarray | None = None,
        group: int = 0,
    ):
        sizes = {k: len(v) for k, v in arrays.items()}
        if not sizes or len(set(sizes.values())) != 1:
            raise DataError(f"batch arrays must be non-empty and equally long, got {sizes}")
        self.arrays = {k: np.asarray(v) for k, v in arrays.items()}
        self.n = next(iter(sizes.values()))
        if self.n == 0:
            raise DataError("no training examples")
        if batch_size > self.n:
            raise DataError(
                f"train.batch_size ({batch_size}) is larger than the {self.n} training examples"
            )
        self.batch_size = batch_size
        self.seed = seed
        self.shuffle = shuffle
        self.steps_per_epoch = max(1, self.n // batch_size)
        if group and (lengths is None or len(lengths) != self.n):
            raise DataError("grouping batches by length needs one length per example")
        self.lengths = None if lengths is None else np.asarray(lengths)
        self.group = group
        self._cached: tuple[int, np.ndarray] | None = None

    def _order(self, epoch: int) -> np.ndarray:
        if self._cached is not None and self._cached[0] == epoch:
            return self._cached[1]
        if not self.shuffle:
            order = np.arange(self.n)
        else:
            rng = np.random.default_rng([self.seed, epoch])
            order = rng.permutation(self.n)
            if self.group and self.lengths is not None:
                order = self._grouped(order, self.lengths, rng)
        self._cached = (epoch, order)
        return order

    def _grouped(
        self, order: np.ndarray, lengths: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        """`order` cut into pools of `group` batches, each pool sorted by length and cut
        into batches, the batches then shuffled: each batch holds examples of similar
        length (so `TrimmedBatches` cuts most padding) while which examples meet in a
        pool, and the order batches come in, stay random."""
        b = self.batch_size
        used = self.steps_per_epoch * b
        pool = self.group * b
        head = order[:used].copy()
        for s in range(0, used, pool):
            chunk = head[s : s + pool]
            head[s : s + pool] = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches = head.reshape(self.steps_per_epoch, b)[rng.permutation(self.steps_per_epoch)]
        return np.concatenate([batches.reshape(-1), order[used:]])

    def __call__(self, step: int) -> dict[str, np.ndarray]:
        epoch, k = divmod(step, self.steps_per_epoch)
        order = self._order(epoch)
        idx = np.take(order, np.arange(k * self.batch_size, (k + 1) * self.batch_size), mode="wrap")
        return {name: a[idx] for name, a in self.arrays.items()}


class TrimmedBatches:
    """`source`'s batches with trailing all-padding columns cut, to a multiple of `multiple`.

    Why: a run is packed to its longest example, but most examples are far shorter (the
    quickstart's routing data: longest 96 tokens, median 25). Cutting each batch to its own
    longest row, rounded up to `multiple`, skips the padding columns' work (~1.5x fewer
    tokens per SFT step there) at one compile per distinct length. The batches hold the
    same rows as `source`'s (resume stays exact), and for right-padded rows whose padding
    carries no loss and is masked from attention the loss is the same.

    Every `[B, T, ...]` field (T the `mask` field's length) is cut; others pass through.
    """

    def __init__(self, source: BatchSource, multiple: int, *, mask: str = "attn"):
        if multiple < 1:
            raise ValueError("multiple must be at least 1")
        self.source, self.multiple, self.mask = source, multiple, mask
        self.steps_per_epoch = getattr(source, "steps_per_epoch", None)

    def __call__(self, step: int) -> HostBatch:
        batch = self.source(step)
        m = batch[self.mask]
        full = m.shape[1]
        used = np.flatnonzero(m.any(0))
        need = int(used[-1]) + 1 if used.size else 1
        length = min(full, -(-need // self.multiple) * self.multiple)
        if length == full:
            return batch
        return {
            k: v[:, :length] if v.ndim >= 2 and v.shape[1] == full else v for k, v in batch.items()
        }


class _IterableSource:
    """Adapts an iterable of batches; `source(step)` must be called with consecutive steps."""

    def __init__(self, batches: Iterable[HostBatch]):
        self._it: Iterator[HostBatch] = iter(batches)
        self._pos = 0

    def __call__(self, step: int) -> HostBatch:
        if step < self._pos:
            raise DataError(f"iterable batches cannot rewind from {self._pos} to step {step}")
        while self._pos < step:  # fast-forward after a resume
            next(self._it)
            self._pos += 1
        try:
            batch = next(self._it)
        except StopIteration:
            raise DataError(f"batch iterable ran out at step {step}") from None
        self._pos += 1
        return batch


def as_source(batches: BatchSource | Iterable[HostBatch] | Any) -> BatchSource:
    """A step-indexed source from a callable (returned as is) or an iterable."""
    if callable(batches):
        return batches
    return _IterableSource(batches)
