"""The run feed read from the database: for a run that runs in another process, or ended.

The owner flushes its log every 100 ms (`recorder.FLUSH_SECONDS`); a follower polls soon after
new frames, backing off to `Timings.feed_poll_seconds` while nothing arrives. Such a follower also marks the
run as watched, so the owner's disconnect policy knows it is there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable

from ..protocol import timbal
from ..protocol.clock import now_ms
from ..runs.feed import read_persisted
from ..runs.log import Entry, LiveLog
from ..runs.timings import Timings
from ..store.repository import ACTIVE_RUN_STATUSES, UNAVAILABLE, Store

log = logging.getLogger(__name__)


class DatabaseFeed:
    def __init__(self, store: Store, timings: Timings) -> None:
        self.store, self.timings = store, timings

    async def publish(self, live: LiveLog, stopped: Callable[[], bool]) -> None:
        """Nothing to do: the run's recorder writes its log to the database."""

    async def subscribe(self, run_id: str, after: int = 0) -> AsyncGenerator[Entry, None]:
        store = self.store
        timings = self.timings
        seq, touched, delay = after, 0, timings.feed_min_poll_seconds
        while True:
            try:
                # Read the status first: a run's terminal state commits together with the end
                # of its log, so if it had ended by now, the reads below see its last frame.
                row = await store.get_run(run_id)
                active = row is not None and row.status in ACTIVE_RUN_STATUSES
                before = seq
                async for entry in read_persisted(store, run_id, seq):
                    seq = entry.seq
                    yield entry
                    if timbal.is_terminal(entry.frame):
                        return
                if not active:
                    if seq == before:
                        async for entry in self._end_behind(run_id, seq):
                            yield entry
                    return
                now = now_ms()
                if now - touched >= timings.watch_touch_ms:
                    touched = now
                    await store.touch_watched(run_id, now)
            except UNAVAILABLE as error:  # unreachable for a moment: the reader waits, resumes
                log.warning("run %s: reading its log failed (%s); retrying", run_id,
                            type(error).__name__)
                before = -1
            delay = (timings.feed_min_poll_seconds if seq > before
                     else min(delay * 2, timings.feed_poll_seconds))
            await asyncio.sleep(delay)

    async def _end_behind(self, run_id: str, seq: int) -> AsyncGenerator[Entry, None]:
        """A run that ended without its end after `seq`: its process died after showing
        frames it never persisted, and the reaper's `RUN_LOST` went after the last persisted
        one. The reader still gets that end, so it always learns how the run ended."""
        last = await self.store.last_frame(run_id)
        if last is not None and last.seq <= seq and timbal.is_terminal(last.frame):
            yield Entry(last.seq, last.ts_ms, last.frame)
