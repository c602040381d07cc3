"""Signals between processes: a cancel requested wherever a `DELETE` lands reaches the process
that runs the run; a thread event (a component state update) made on one process reaches the
run streaming on that thread in another.

The database flag is the durable signal: it is always written, and every process polls it for
the runs it owns (one query per tick, only while it runs something), so a cancel is never lost
even when a faster channel is down. `DatabaseSignals` is that alone; `signals_redis` (Redis
pub/sub) and `signals_pg` (PostgreSQL LISTEN/NOTIFY, when there is no Redis) add a channel in
front of it that delivers within milliseconds instead of a poll interval. Thread events have no
durable form (the state itself is in the database): they travel on that channel, and on SQLite,
which has none, they reach only the runs of the process they were made on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Protocol

from ..protocol.clock import now_ms
from ..store.repository import Store
from .timings import Timings

log = logging.getLogger(__name__)

OnCancel = Callable[[str], None]
ThreadEvent = dict[str, Any]
OnThreadEvent = Callable[[str, ThreadEvent], Awaitable[None]]
OwnedRuns = Callable[[], Collection[str]]


class Signals(Protocol):
    async def request_cancel(self, run_id: str) -> None:
        """Ask whichever process runs `run_id` to cancel it."""
        ...

    async def publish_thread_event(self, thread_id: str, event: ThreadEvent) -> None:
        """Tell the other processes about `event` on the thread (JSON-serialisable)."""
        ...

    async def listen(self, owned: OwnedRuns, on_cancel: OnCancel,
                     on_thread_event: OnThreadEvent) -> None:
        """Call `on_cancel(run_id)` for each cancel requested for one of the `owned()` runs,
        and `on_thread_event` for each event another process published; until cancelled."""
        ...


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
            try:
                ids = list(owned())
                if ids:
                    for run_id in await self.store.cancel_requested(ids):
                        on_cancel(run_id)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("polling cancel flags failed")
            await asyncio.sleep(self.poll_seconds)


async def listen_with_reconnects(database: DatabaseSignals, owned: OwnedRuns,
                                 on_cancel: OnCancel,
                                 channel: Callable[[], Awaitable[None]],
                                 lost: tuple[type[BaseException], ...], what: str,
                                 retry_seconds: float) -> None:
    """Listen on a fast `channel` (until its connection is `lost`, then again, forever), with
    the database flag polled beside it: a cancel sent while the channel was down still lands."""
    polling = asyncio.create_task(database.listen(owned, on_cancel))
    try:
        while True:
            try:
                await channel()
            except lost as error:
                log.warning("%s lost (%s); reconnecting", what, type(error).__name__)
            await asyncio.sleep(retry_seconds)
    finally:
        polling.cancel()

