"""Signals through Redis pub/sub: cancels (in front of the database flag) and thread events.

A cancel is published on `CANCEL_CHANNEL` and written to the database (durable: the owner's
poll finds it even if Redis is down); every process listens, and the one that runs the run
cancels it within milliseconds instead of a poll interval. Thread events go on
`THREAD_EVENTS_CHANNEL`; each process delivers them to the run it streams on that thread, if any.
"""

from __future__ import annotations

import asyncio
import json
import logging

from redis.asyncio import Redis
from redis.exceptions import RedisError

from ..observability import metrics
from ..store.repository import Store
from .signals import (
    DatabaseSignals,
    OnCancel,
    OnThreadEvent,
    OwnedRuns,
    ThreadEvent,
    deliver_in_order,
    listen_with_reconnects,
)
from .timings import Timings

CANCEL_CHANNEL = "gateway:cancel"
THREAD_EVENTS_CHANNEL = "gateway:thread-events"
RETRY_SECONDS = 0.5

log = logging.getLogger(__name__)


class RedisSignals:
    def __init__(self, store: Store, redis: Redis, timings: Timings) -> None:
        self.redis = redis
        self.database = DatabaseSignals(store, timings)

    async def request_cancel(self, run_id: str) -> None:
        # Published first: the owner cancels as soon as it hears, without waiting for the
        # database write; the flag follows for the case the message is lost with Redis.
        try:
            with metrics.timed_redis("publish"):
                await self.redis.publish(CANCEL_CHANNEL, run_id)
        except (RedisError, OSError) as error:
            log.warning("cancel of run %s not published to Redis (%s); its process will see "
                        "the database flag", run_id, error)
        await self.database.request_cancel(run_id)

    async def publish_thread_event(self, thread_id: str, event: ThreadEvent) -> None:
        try:
            with metrics.timed_redis("publish"):
                await self.redis.publish(THREAD_EVENTS_CHANNEL,
                                         json.dumps({"threadId": thread_id, "event": event}))
        except (RedisError, OSError) as error:
            log.warning("thread event on %s not published (%s)", thread_id, error)

    async def listen(self, owned: OwnedRuns, on_cancel: OnCancel,
                     on_thread_event: OnThreadEvent) -> None:
        await listen_with_reconnects(
            self.database, owned, on_cancel,
            lambda: self._subscribe(owned, on_cancel, on_thread_event),
            (RedisError, OSError), "cancel channel", RETRY_SECONDS)

    async def _subscribe(self, owned: OwnedRuns, on_cancel: OnCancel,
                         on_thread_event: OnThreadEvent) -> None:
        events: asyncio.Queue[tuple[str, ThreadEvent]] = asyncio.Queue()
        delivering = asyncio.create_task(deliver_in_order(events, on_thread_event))
        try:
            async with self.redis.pubsub(ignore_subscribe_messages=True) as pubsub:
                await pubsub.subscribe(CANCEL_CHANNEL, THREAD_EVENTS_CHANNEL)
                async for message in pubsub.listen():
                    if message["channel"] == CANCEL_CHANNEL.encode():
                        run_id = message["data"].decode()
                        if run_id in owned():
                            on_cancel(run_id)
                        continue
                    body = json.loads(message["data"])
                    events.put_nowait((body["threadId"], body["event"]))
        finally:
            delivering.cancel()
