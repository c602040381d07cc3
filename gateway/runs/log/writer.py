"""One writer for the logs of every run in the process: one timer, one commit for all runs.

Each run's log is persisted in batches, every `FLUSH_SECONDS`. With a transaction (and a timer)
per run, the transactions grew with the runs: on SQLite a queue behind one write lock, where
every waiting writer slept in SQLite's busy handler while the reads and run starts of other
requests queued behind it (docs/decisions/0014-one-log-writer.md). Here one timer for the
whole process collects what every registered run has not written yet, and one commit writes it
(one lease check and one INSERT for all of them, `Store.append_frames_batch`); a run that needs
its frames on disk sooner (`flush`) and batches handed in directly (`append`) join the next
commit, gathered for `GATHER_SECONDS`.

The timer runs only while a run is registered: the last one to leave stops it, and the next
to come starts it again. A one-token run is over long before its first tick (its end writes
its frames itself), so runs arriving one at a time used to leave a tick behind them that woke
the loop to find nothing (docs/decisions/0028).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Protocol

from ...observability import outages
from ...store.queries.frames import LogBatch
from ...store.repository import UNAVAILABLE, FrameEntry, Store

# How often the frames of every run are written.
FLUSH_SECONDS = 0.1
# How long the writer waits after a request for others: requests of different runs come close
# together, so a short wait gathers many of them into one commit.
GATHER_SECONDS = 0.01

log = logging.getLogger(__name__)


class Source(Protocol):
    """A run's log as the writer sees it (`recorder.RunRecorder`)."""

    def claim(self) -> LogBatch | None:
        """The frames not written yet, held for this commit; None if there is nothing to
        write (or the run's own end is writing them)."""
        ...

    def written(self, outcome: bool | BaseException) -> None:
        """The claimed frames are on disk (True), were refused because the run was fenced
        out (False), or could not be written (the exception: the next commit retries)."""
        ...


class LogWriter:
    def __init__(self, store: Store, interval: float = FLUSH_SECONDS) -> None:
        self.store, self.interval = store, interval
        self._sources: dict[Source, None] = {}  # ordered, and a set
        self._requests: list[tuple[Source, asyncio.Future[None]]] = []
        self._appends: list[tuple[LogBatch, asyncio.Future[bool]]] = []
        self._due = False  # the timer fired: every source is written in the next commit
        self._timer: asyncio.TimerHandle | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def register(self, source: Source) -> None:
        """Write `source` on every tick until `unregister`."""
        self._sources[source] = None
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.interval, self._tick)

    def unregister(self, source: Source) -> None:
        """Stop writing `source` on ticks; the last one to go stops the timer (a cancelled
        timer costs no wake-up; `register` starts a full interval again)."""
        self._sources.pop(source, None)
        if not self._sources and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    @property
    def ticking(self) -> bool:
        """Whether the timer is armed (it is while a run is registered)."""
        return self._timer is not None

    async def flush(self, source: Source) -> None:
        """Write what `source` has not written yet in the next commit, and return once it is
        done; raises what the commit raised."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._requests.append((source, future))
        self._start()
        await future

    async def append(self, run_id: str, entries: Sequence[FrameEntry],
                     owner: str | None = None) -> bool:
        """Persist a batch of a run's log, under `owner`'s lease; False if the run was fenced
        out (as `Store.append_frames`). Returns once the commit that holds it is done."""
        if not entries:
            return True
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._appends.append((LogBatch(run_id, entries, owner), future))
        self._start()
        return await future

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def _tick(self) -> None:
        self._timer = None
        if not self._sources:
            return  # re-armed by the next `register`
        self._due = True
        self._start()
        self._timer = asyncio.get_running_loop().call_later(self.interval, self._tick)

    def _start(self) -> None:
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._write(), name="run log writer")

    async def _write(self) -> None:
        requests: list[tuple[Source, asyncio.Future[None]]] = []
        appends: list[tuple[LogBatch, asyncio.Future[bool]]] = []
        try:
            while True:
                await self._wake.wait()
                if not self._due:
                    await asyncio.sleep(GATHER_SECONDS)
                self._wake.clear()
                requests, self._requests = self._requests, []
                appends, self._appends = self._appends, []
                due, self._due = self._due, False
                wanted = self._sources if due else dict.fromkeys(s for s, _ in requests)
                claims = [(s, b) for s in list(wanted) if (b := s.claim()) is not None]
                await self._commit(claims, requests, appends)
        finally:  # closed: nobody may wait for a commit that will never come
            waiting: list[asyncio.Future[None] | asyncio.Future[bool]] = [
                f for _, f in [*requests, *self._requests]]
            waiting += [f for _, f in [*appends, *self._appends]]
            for future in waiting:
                if not future.done():
                    future.cancel()

    async def _commit(self, claims: list[tuple[Source, LogBatch]],
                      requests: list[tuple[Source, asyncio.Future[None]]],
                      appends: list[tuple[LogBatch, asyncio.Future[bool]]]) -> None:
        batches = [b for _, b in claims] + [b for b, _ in appends]
        error: Exception | None = None
        fenced: set[str] = set()
        if batches:
            try:
                fenced = await self.store.append_frames_batch(batches)
            except Exception as exc:  # each run decides (its frames stay pending)
                error = exc
                if isinstance(exc, UNAVAILABLE):
                    outages.down("database", f"writing run logs failed: {type(exc).__name__}")
            else:
                outages.up("database")
        for source, batch in claims:
            source.written(error if error is not None else batch.run_id not in fenced)
        claimed = {source for source, _ in claims}
        for source, future in requests:
            if future.done():
                continue
            if error is not None and source in claimed:
                future.set_exception(error)
            else:
                future.set_result(None)
        for batch, result in appends:
            if not result.done():
                if error is not None:
                    result.set_exception(error)
                else:
                    result.set_result(batch.run_id not in fenced)
