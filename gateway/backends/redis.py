"""The run feed through Redis: one Redis Stream per run carries its live tail to every process.

The owner appends each entry of the run's live log to the stream `gateway:run:<id>` with the
entry id `0-<seq>`, so a subscriber on any process resumes from its cursor with one blocking
`XREAD` from `0-<cursor>`: no polling, no gap, no duplicate. The stream is only a tail: the
database keeps the durable log, finished runs replay from it, and a stream expires
`ENDED_TTL_SECONDS` after its run ends.

Redis holds nothing that cannot be lost. If it goes away, a subscriber falls back to reading the
database (`feeds_db`) from where it was, and the owner keeps its run going and, once Redis is
back, re-publishes the stream from what is there (an empty stream after a restart: from the
first entry), so subscribers that come later read it whole again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, Callable
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from ..protocol import timbal
from ..protocol.clock import now_ms
from ..runs.log import Entry, LiveLog
from ..runs.redis_appends import StreamAppends
from ..runs.timings import Timings
from ..store.repository import ACTIVE_RUN_STATUSES, UNAVAILABLE, Store
from .database import DatabaseFeed

READ_COUNT = 500
ACTIVE_TTL_SECONDS = 3600  # an owner that died leaves no litter
TTL_REFRESH_SECONDS = 60  # how often a live run's stream has its expiry pushed back
ENDED_TTL_SECONDS = 60  # late subscribers of a finished run are served by the database anyway
RETRY_SECONDS = 0.5

log = logging.getLogger(__name__)


def stream_key(run_id: str) -> str:
    return f"gateway:run:{run_id}"


class RedisFeed:
    def __init__(self, store: Store, redis: Redis, timings: Timings) -> None:
        self.store, self.redis = store, redis
        self.database, self.timings = DatabaseFeed(store, timings), timings
        self.appends = StreamAppends(redis)

    # -- the owner's side -------------------------------------------------------------------------

    async def publish(self, live: LiveLog, stopped: Callable[[], bool]) -> None:
        """Append the live log's entries to the run's stream until the log closes; stop early if
        `stopped()` (the run was taken over by another process, which owns its end)."""
        key, published, healthy = stream_key(live.run_id), 0, True
        expiry_due = 0.0  # when the stream's expiry is next pushed back (monotonic)
        live.hold("redis", published)
        try:
            while not stopped():
                batch = live.since(published)
                if batch:
                    now = asyncio.get_running_loop().time()
                    ttl = ACTIVE_TTL_SECONDS if now >= expiry_due else None
                    try:
                        await self.appends.append(key, [
                            (f"0-{entry.seq}", {"ts": entry.ts, "f": json.dumps(entry.frame)})
                            for entry in batch], ttl)
                    except (RedisError, OSError) as error:
                        expiry_due = 0.0  # Redis may have restarted empty
                        if healthy:
                            log.warning("run %s: Redis unavailable (%s); its subscribers read the "
                                        "database meanwhile", live.run_id, error)
                            healthy = False
                        await asyncio.sleep(RETRY_SECONDS)
                        published = await self._published(key, published)
                        continue
                    published = batch[-1].seq
                    if ttl is not None:
                        expiry_due = now + TTL_REFRESH_SECONDS
                    live.hold("redis", published)
                    if not healthy:
                        log.info("run %s: publishing to Redis again", live.run_id)
                        healthy = True
                if live.closed and published >= live.last:
                    break
                await live.wait_beyond(published)
        finally:
            live.release("redis")  # memory may forget what this run published
        try:
            await self.redis.expire(key, ENDED_TTL_SECONDS)
        except (RedisError, OSError):
            pass  # it expires with ACTIVE_TTL_SECONDS

    async def _published(self, key: str, fallback: int) -> int:
        """How much of the log the stream holds (after an error: maybe all, maybe none if Redis
        restarted empty); `fallback` if Redis cannot tell yet."""
        try:
            last: Any = await self.redis.xrevrange(key, count=1)
        except (RedisError, OSError):
            return fallback
        return _seq(last[0][0]) if last else 0

    # -- subscribers ------------------------------------------------------------------------------

    async def subscribe(self, run_id: str, after: int = 0) -> AsyncGenerator[Entry, None]:
        store, seq, touched = self.store, after, 0
        row = await store.get_run(run_id)
        if row is None or row.status not in ACTIVE_RUN_STATUSES:
            async for entry in self.database.subscribe(run_id, seq):
                yield entry
            return
        key = stream_key(run_id)
        while True:
            try:
                reply: Any = await self.redis.xread({key: f"0-{seq}"}, count=READ_COUNT,
                                                    block=self.timings.redis_block_ms)
            except (RedisError, OSError) as error:
                log.warning("run %s: reading its stream failed (%s); reading the database",
                            run_id, error)
                break
            entries = reply[0][1] if reply else []
            gap = False
            for entry_id, fields in entries:
                position = _seq(entry_id)
                if position != seq + 1:  # the stream lost its head: the database has it
                    gap = True
                    break
                seq = position
                frame = json.loads(fields[b"f"])
                yield Entry(position, int(fields[b"ts"]), frame)
                if timbal.is_terminal(frame):
                    return
            if gap:
                break
            try:
                now = now_ms()
                if now - touched >= self.timings.watch_touch_ms:
                    touched = now
                    await store.touch_watched(run_id, now)
                if not entries:
                    row = await store.get_run(run_id)
                    if row is None or row.status not in ACTIVE_RUN_STATUSES:
                        break  # ended without its end in the stream (its process died)
            except UNAVAILABLE as error:  # the stream goes on; the database will be back
                log.warning("run %s: the database is unreachable (%s)", run_id,
                            type(error).__name__)
        async for entry in self.database.subscribe(run_id, seq):
            yield entry


def _seq(entry_id: bytes | str) -> int:
    raw = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(raw.partition("-")[2])
