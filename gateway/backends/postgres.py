"""PostgreSQL without Redis as the backend: the database's polled feeds and counters in memory
(`database.py`), with signals through LISTEN/NOTIFY: cancels and thread events between processes
that share the database.

The database is already the one thing every process reaches, and it carries notifications: a
cancel is a `NOTIFY` on `CANCEL_CHANNEL` in front of the database flag (the owner cancels as
soon as it hears, the flag's poll stays as the durable path), a thread event (a component
state update) a `NOTIFY` on `THREAD_EVENTS_CHANNEL`. Each process listens on one dedicated
connection of its own, outside the pool. PostgreSQL refuses a notification over 8000 bytes; an
event larger than that goes out as a reference (its `kind`, `componentId` and `reload: true`),
and the receiver reads the state itself from the database.

Notifications are lost while a listener is disconnected; the listener reconnects by itself.
A lost cancel still arrives through the flag; a lost state update reaches viewers with the
next one (sent whole when the revisions do not follow), or on their next read.
"""

from __future__ import annotations

import asyncio
import json
import logging

import asyncpg

from ..runs.backend import Backend, OnCancel, OnThreadEvent, OwnedRuns, ThreadEvent
from ..runs.timings import Timings
from ..store.repository import UNAVAILABLE, Store
from .database import (
    DatabaseFeed,
    DatabaseSignals,
    database_probe,
    deliver_in_order,
    listen_with_reconnects,
)
from .memory import MemoryCounters

CANCEL_CHANNEL = "gateway_cancel"
THREAD_EVENTS_CHANNEL = "gateway_thread_events"
MAX_PAYLOAD_BYTES = 7999  # PostgreSQL's limit is 8000 bytes
HEALTH_SECONDS = 5.0  # an idle listener checks its connection this often
RETRY_SECONDS = 0.5

log = logging.getLogger(__name__)


def postgres_backend(dsn: str, store: Store, timings: Timings) -> Backend:
    """Polled feeds, LISTEN/NOTIFY in front of the cancel flag (listening on a connection of its
    own to `dsn`, a plain `postgresql://` URL), this process's counters."""
    return Backend("postgres", DatabaseFeed(store, timings), PostgresSignals(store, dsn, timings),
                   MemoryCounters(), (database_probe(store),))


class PostgresSignals:
    def __init__(self, store: Store, dsn: str, timings: Timings) -> None:
        self.store, self.dsn = store, dsn
        self.database = DatabaseSignals(store, timings)

    async def request_cancel(self, run_id: str) -> None:
        # Notified first, as on Redis: the owner cancels without waiting for the flag's write.
        try:
            await self.store.notify(CANCEL_CHANNEL, run_id)
        except UNAVAILABLE as error:
            log.warning("cancel of run %s not notified (%s); its process will see the "
                        "database flag", run_id, type(error).__name__)
        await self.database.request_cancel(run_id)

    async def publish_thread_event(self, thread_id: str, event: ThreadEvent) -> None:
        payload = json.dumps({"threadId": thread_id, "event": event})
        if len(payload.encode()) > MAX_PAYLOAD_BYTES:
            reference: ThreadEvent = {"kind": event["kind"], "componentId": event["componentId"],
                                      "reload": True}
            payload = json.dumps({"threadId": thread_id, "event": reference})
        try:
            await self.store.notify(THREAD_EVENTS_CHANNEL, payload)
        except UNAVAILABLE as error:
            log.warning("thread event on %s not notified (%s)", thread_id,
                        type(error).__name__)

    async def listen(self, owned: OwnedRuns, on_cancel: OnCancel,
                     on_thread_event: OnThreadEvent) -> None:
        await listen_with_reconnects(
            self.database, owned, on_cancel,
            lambda: self._listen(owned, on_cancel, on_thread_event),
            (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError),
            "database", RETRY_SECONDS)

    async def _listen(self, owned: OwnedRuns, on_cancel: OnCancel,
                      on_thread_event: OnThreadEvent) -> None:
        """Until the connection is lost: cancels at once (in the driver's callback), thread
        events in order, apart (delivering one awaits)."""
        events: asyncio.Queue[tuple[str, ThreadEvent]] = asyncio.Queue()
        lost = asyncio.Event()

        def heard(_connection: object, _pid: int, channel: str, payload: str) -> None:
            if channel == THREAD_EVENTS_CHANNEL:
                body = json.loads(payload)
                events.put_nowait((body["threadId"], body["event"]))
            elif payload in owned.ids():
                on_cancel(payload)

        connection = await asyncpg.connect(self.dsn, timeout=5)
        delivering = asyncio.create_task(deliver_in_order(events, on_thread_event))
        try:
            connection.add_termination_listener(lambda _connection: lost.set())
            await connection.add_listener(CANCEL_CHANNEL, heard)
            await connection.add_listener(THREAD_EVENTS_CHANNEL, heard)
            while not lost.is_set():
                try:
                    await asyncio.wait_for(lost.wait(), HEALTH_SECONDS)
                except TimeoutError:
                    # A connection cut without a FIN shows only when it is used.
                    await connection.fetchval("SELECT 1", timeout=HEALTH_SECONDS)
        finally:
            delivering.cancel()
            connection.terminate()
