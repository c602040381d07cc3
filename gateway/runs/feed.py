"""Run feeds: subscribe to a run's log entries from a cursor, until the run ends.

A feed yields log entries (`seq`, `ts`, frame) in order, without gaps or duplicates, and knows
nothing of dialects: translating entries into events is the endpoint's job. One implementation
per place a log can be read from: this process's memory (`LiveFeed`), the database
(`feeds_db.DatabaseFeed`), a Redis Stream (`feeds_redis.RedisFeed`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Callable
from typing import Protocol

from ..store.repository import UNAVAILABLE, Store
from .log import Entry, LiveLog
from .timings import Timings

PAGE_FRAMES = 1000  # replay from the database in pages, never one giant read

log = logging.getLogger(__name__)


class RunFeed(Protocol):
    def subscribe(self, run_id: str, after: int = 0) -> AsyncGenerator[Entry, None]:
        """The run's entries with `seq > after`, then live ones until its terminal frame."""
        ...

    async def publish(self, live: LiveLog, stopped: Callable[[], bool]) -> None:
        """Make the live log of a run of this process readable by `subscribe` in the others,
        until the log closes (or `stopped()`)."""
        ...


class LiveFeed:
    """The log of a run that runs (or just ended) in this process, read from memory; what
    memory no longer holds (see `log.LiveLog.forget`) is read from the database first.

    A reader in memory holds its position, so memory keeps what it has not read: a reader a
    little behind a fast run must not be sent to the database (several times the CPU per
    entry). A reader stuck on its socket is disconnected after `slow_reader_seconds`, which
    bounds what it can hold."""

    def __init__(self, live: LiveLog, store: Store, timings: Timings) -> None:
        self.live, self.store, self.timings = live, store, timings

    async def subscribe(self, run_id: str, after: int = 0) -> AsyncGenerator[Entry, None]:
        live = self.live
        live.subscribers += 1
        holder = f"reader-{id(self)}"  # what this reader has not read stays in memory
        try:
            seq = after
            while True:
                if seq < live.first:
                    async with contextlib.aclosing(self._forgotten(run_id, seq)) as forgotten:
                        async for entry in forgotten:
                            yield entry
                            seq = entry.seq
                    continue
                live.hold(holder, seq)  # once per wake-up: until the next, memory keeps a
                # little more than this reader needs, never less
                for entry in live.since(seq):
                    yield entry
                    seq = entry.seq
                if live.closed and seq >= live.last:
                    return
                await live.wait_beyond(seq)
        finally:
            live.release(holder)
            live.subscribers -= 1

    async def _forgotten(self, run_id: str, after: int) -> AsyncGenerator[Entry, None]:
        """The entries after `after` that memory forgot, from the database: up to `live.first`
        only, since past it a fenced run's memory and the database can differ (the reaper's
        end), and memory is what this process has shown."""
        live, seq = self.live, after
        while seq < live.first:
            before = seq
            try:
                async with contextlib.aclosing(
                        read_persisted(self.store, run_id, seq)) as persisted:
                    async for entry in persisted:
                        if entry.seq > live.first:
                            break
                        yield entry
                        seq = entry.seq
            except UNAVAILABLE as error:  # the reader waits; the run goes on
                log.warning("run %s: reading its log failed (%s); retrying", run_id,
                            type(error).__name__)
                await asyncio.sleep(self.timings.feed_poll_seconds)
                continue
            if seq == before:
                raise RuntimeError(f"run {run_id}: positions {seq + 1} to {live.first} are "
                                   "neither in memory nor in the database")


async def read_persisted(store: Store, run_id: str, after: int) -> AsyncGenerator[Entry, None]:
    """The entries on disk now with `seq > after`, read in pages."""
    while True:
        rows = await store.read_frames(run_id, after, PAGE_FRAMES)
        for row in rows:
            after = row.seq
            yield Entry(row.seq, row.ts_ms, row.frame)
        if len(rows) < PAGE_FRAMES:
            return
