"""Run feeds: subscribe to a run's log entries from a cursor, until the run ends.

A feed yields log entries (`seq`, `ts`, frame) in order, without gaps or duplicates, and knows
nothing of dialects: translating entries into events is the endpoint's job. One implementation
per place a log can be read from: this process's memory (`LiveFeed`), the database
(`feeds_db.DatabaseFeed`), a Redis Stream (`feeds_redis.RedisFeed`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Protocol

from .log import Entry, LiveLog


class RunFeed(Protocol):
    def subscribe(self, run_id: str, after: int = 0) -> AsyncGenerator[Entry, None]:
        """The run's entries with `seq > after`, then live ones until its terminal frame."""
        ...

    async def publish(self, live: LiveLog, stopped: Callable[[], bool]) -> None:
        """Make the live log of a run of this process readable by `subscribe` in the others,
        until the log closes (or `stopped()`)."""
        ...


class LiveFeed:
    """The log of a run that runs (or just ended) in this process, read from memory."""

    def __init__(self, live: LiveLog) -> None:
        self.live = live

    async def subscribe(self, run_id: str, after: int = 0) -> AsyncGenerator[Entry, None]:
        live = self.live
        live.subscribers += 1
        try:
            index = after
            while True:
                while index < len(live.entries):
                    yield live.entries[index]
                    index += 1
                if live.closed:
                    return
                await live.wait_beyond(index)
        finally:
            live.subscribers -= 1
