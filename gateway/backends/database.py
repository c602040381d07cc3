"""The database as the backend: run feeds polled from the log on disk, cancels through the
database flag, quota counters in memory. What every deployment without Redis uses (on
PostgreSQL, `postgres.py` adds LISTEN/NOTIFY in front of the flag).

Feed: the owner flushes its log every 100 ms (`recorder.FLUSH_SECONDS`); a follower in another
process polls soon after new frames, backing off to `Timings.feed_poll_seconds` while nothing
arrives. Such a follower also marks the run as watched, so the owner's disconnect policy knows
it is there (`runs/log/subscription.py`).

Signals: the flag is the durable signal. It is always written (by every backend), and every
process polls it for the runs it owns (one query per tick, only while it runs something), so a
cancel is never lost even when a faster channel is down. Thread events have no channel here:
they stay in the process they were made on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable

from ..observability import outages
from ..protocol import timbal
from ..protocol.clock import now_ms
from ..protocol.problems import Problem
from ..runs.backend import (
    Backend,
    OnCancel,
    OnThreadEvent,
    OwnedRuns,
    Probe,
    ThreadEvent,
)
from ..runs.log.live import Entry, LiveLog, persisted, read_persisted
from ..runs.timings import Timings
from ..store.repository import ACTIVE_RUN_STATUSES, UNAVAILABLE, Store
from .memory import MemoryCounters

log = logging.getLogger(__name__)


def database_backend(store: Store, timings: Timings) -> Backend:
    """Polled feeds, the polled cancel flag, this process's counters."""
    return Backend("database", DatabaseFeed(store, timings), DatabaseSignals(store, timings),
                   MemoryCounters(), (database_probe(store),))


def database_probe(store: Store) -> Probe:
    return Probe("database", Problem.DATABASE_UNAVAILABLE, "The database cannot be reached",
                 store.ping)


class DatabaseFeed:
    publishes = False  # `publish` has nothing to do: runs get no publishing task

    def __init__(self, store: Store, timings: Timings) -> None:
        self.store, self.timings = store, timings

    async def publish(self, live: LiveLog, stopped: Callable[[], bool]) -> None:
        """Nothing to do: the run's recorder writes its log to the database."""

    async def salvage(self, run_id: str, after: int, limit: int) -> list[Entry]:
        """Nothing: followers elsewhere read only what the database has."""
        return []

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
                outages.down("database", f"following run {run_id}: {type(error).__name__}")
                before = -1
            delay = (timings.feed_min_poll_seconds if seq > before
                     else min(delay * 2, timings.feed_poll_seconds))
            await asyncio.sleep(delay)

    async def _end_behind(self, run_id: str, seq: int) -> AsyncGenerator[Entry, None]:
        """A run that ended without its end after `seq`: its process died after showing
        frames it never persisted, and the reaper's `RUN_LOST` went after the last persisted
        one. The reader still gets that end, so it always learns how the run ended."""
        last = await self.store.last_frame(run_id)
        end = persisted(last) if last is not None and last.seq <= seq else None
        if end is not None and timbal.is_terminal(end.frame):
            yield end


class DatabaseSignals:
    def __init__(self, store: Store, timings: Timings) -> None:
        self.store, self.poll_seconds = store, timings.cancel_poll_seconds

    async def request_cancel(self, run_id: str) -> None:
        await self.store.request_cancel(run_id, now_ms())

    async def publish_thread_event(self, thread_id: str, event: ThreadEvent) -> None:
        """Nothing: without a bus, thread events stay in the process they were made on."""

    async def listen(self, owned: OwnedRuns, on_cancel: OnCancel,
                     on_thread_event: OnThreadEvent | None = None) -> None:
        while True:
            # Asleep while no run goes here, and a poll's wait after one starts (not a read at
            # once: a run shorter than that is never looked at, as before at a random phase).
            # If every run ends before the poll is due, its timer is dropped unfired: runs
            # arriving one at a time, each shorter than the wait, left a wake-up behind each
            # (docs/decisions/0028-no-idle-timers.md).
            await owned.running()
            try:
                async with asyncio.timeout(self.poll_seconds):
                    await owned.idle()
                continue
            except TimeoutError:
                pass
            try:
                ids = list(owned.ids())
                if ids:
                    for run_id in await self.store.cancel_requested(ids):
                        on_cancel(run_id)
            except asyncio.CancelledError:
                raise
            except UNAVAILABLE as error:  # the outage is logged once, not once per poll
                outages.down("database", f"polling cancel flags: {type(error).__name__}")
            except Exception:
                log.exception("polling cancel flags failed")


async def deliver_in_order(events: asyncio.Queue[tuple[str, ThreadEvent]],
                           on_thread_event: OnThreadEvent) -> None:
    """Deliver thread events one at a time, in arrival order, apart from the listener that
    received them: a delivery awaits (it writes a frame), and a cancel must never wait behind
    one. Until cancelled."""
    while True:
        thread_id, event = await events.get()
        try:
            await on_thread_event(thread_id, event)
        except Exception:
            log.exception("delivering a thread event on %s failed", thread_id)


async def listen_with_reconnects(database: DatabaseSignals, owned: OwnedRuns,
                                 on_cancel: OnCancel,
                                 channel: Callable[[], Awaitable[None]],
                                 lost: tuple[type[BaseException], ...], part: str,
                                 retry_seconds: float) -> None:
    """Listen on a fast `channel` (until its connection to `part` is `lost`, then again,
    forever), with the database flag polled beside it: a cancel sent while the channel was down
    still lands. A lost channel marks its part out (`outages`: one log line per outage, not one
    per reconnection attempt)."""
    polling = asyncio.create_task(database.listen(owned, on_cancel))
    try:
        while True:
            try:
                await channel()
            except lost as error:
                outages.down(part, f"the signal channel was lost ({type(error).__name__}); "
                             "reconnecting")
            await asyncio.sleep(retry_seconds)
    finally:
        polling.cancel()
