"""One writer for the logs of every run in the process: batches from all runs, one commit.

Each run flushes its log every 100 ms; with a transaction per flush, 100 runs make 1,000
transactions a second. On SQLite that is a queue behind one write lock, where every waiting
writer sleeps in SQLite's busy handler (1, 2, 5, ... 100 ms steps) and holds a pooled
connection meanwhile, so the reads and the run starts of other requests queue too: measured at
100 runs x 50 tokens/s, log appends took 190 ms at the median and 3.5 s at p99, and a new run
waited up to 8 s for its first token (bench/README.md). Here every batch handed in while a
commit is under way (or within `GATHER_SECONDS` of the first) goes into the next commit: at any
load, about one write transaction per flush interval for the whole process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from ..store.repository import FrameEntry, Store

# How long the writer waits after the first batch for others: flushes of different runs are
# spread over the flush interval, so a short wait gathers many of them into one commit.
GATHER_SECONDS = 0.01

log = logging.getLogger(__name__)


class LogWriter:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._queue: list[tuple[str, Sequence[FrameEntry], str | None,
                                asyncio.Future[bool]]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def append(self, run_id: str, entries: Sequence[FrameEntry],
                     owner: str | None = None) -> bool:
        """Persist a batch of a run's log, under `owner`'s lease; False if the run was fenced
        out (as `Store.append_frames`). Returns once the commit that holds it is done."""
        if not entries:
            return True
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._queue.append((run_id, entries, owner, future))
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._write(), name="run log writer")
        return await future

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _write(self) -> None:
        batch: list[tuple[str, Sequence[FrameEntry], str | None, asyncio.Future[bool]]] = []
        try:
            while True:
                await self._wake.wait()
                await asyncio.sleep(GATHER_SECONDS)
                self._wake.clear()
                batch, self._queue = self._queue, []
                try:
                    fenced = await self.store.append_frames_batch(
                        [(run_id, entries, owner) for run_id, entries, owner, _ in batch])
                except Exception as exc:  # each run's recorder decides (it retries the batch)
                    for _, _, _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for run_id, _, _, future in batch:
                    if not future.done():
                        future.set_result(run_id not in fenced)
        finally:  # closed: nobody may wait for a commit that will never come
            for _, _, _, future in [*batch, *self._queue]:
                if not future.done():
                    future.cancel()
