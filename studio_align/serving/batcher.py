"""Dynamic batching: concurrent requests are gathered into one model call.

The model runs in one worker thread, so the event loop keeps accepting requests while a
batch computes; whatever queued meanwhile becomes the next batch. After the first item
of a batch arrives the batcher waits at most `max_wait_ms` for more, so a lone request
pays at most that much extra latency and a busy server fills its batches for free.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class DynamicBatcher(Generic[T, R]):
    def __init__(
        self,
        fn: Callable[[list[T]], Sequence[R]],
        *,
        max_batch: int = 64,
        max_wait_ms: float = 2.0,
        on_batch: Callable[[int], Any] | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        self.fn = fn
        self.max_batch = max_batch
        self.max_wait = max_wait_ms / 1000.0
        self.on_batch = on_batch
        self._queue: asyncio.Queue[tuple[T, asyncio.Future[R]]] | None = None
        self._task: asyncio.Task[None] | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batcher")

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._pool.shutdown(wait=False)

    async def submit(self, item: T) -> R:
        if self._queue is None:
            raise RuntimeError("batcher not started")
        fut: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        await self._queue.put((item, fut))
        return await fut

    async def submit_many(self, items: list[T]) -> list[R]:
        return list(await asyncio.gather(*(self.submit(i) for i in items)))

    async def _collect(self) -> list[tuple[T, asyncio.Future[R]]]:
        assert self._queue is not None
        batch = [await self._queue.get()]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_wait
        while len(batch) < self.max_batch:
            try:
                batch.append(self._queue.get_nowait())
                continue
            except asyncio.QueueEmpty:
                pass
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                batch.append(await asyncio.wait_for(self._queue.get(), remaining))
            except TimeoutError:
                break
        return batch

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._collect()
            live = [(item, fut) for item, fut in batch if not fut.cancelled()]
            if not live:
                continue
            if self.on_batch is not None:
                self.on_batch(len(live))
            try:
                results = await loop.run_in_executor(self._pool, self.fn, [i for i, _ in live])
                if len(results) != len(live):
                    raise RuntimeError(
                        f"batch function returned {len(results)} results for {len(live)} items"
                    )
            except Exception as e:  # one failure fails the batch, never the loop
                for _, fut in live:
                    if not fut.done():
                        fut.set_exception(e)
                continue
            for (_, fut), res in zip(live, results, strict=True):
                if not fut.done():
                    fut.set_result(res)
