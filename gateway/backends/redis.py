"""Redis as the backend: run feeds on Redis Streams, signals on pub/sub, shared quota counters.

Redis holds nothing that cannot be lost; the database (PostgreSQL) keeps the durable log, the
cancel flag and the state.

Feed: one Redis Stream per run carries its live tail to every process. The owner appends each
entry of the run's live log to the stream `gateway:run:<id>` with the entry id `0-<seq>`, so a
subscriber on any process resumes from its cursor with one blocking `XREAD` from `0-<cursor>`:
no polling, no gap, no duplicate. The stream is only a tail: finished runs replay from the
database, and a stream expires `ENDED_TTL_SECONDS` after its run ends. If Redis goes away, a
subscriber falls back to reading the database (`database.DatabaseFeed`) from where it was, and
the owner keeps its run going and, once Redis is back, re-publishes the stream from what is
there (an empty stream after a restart: from the first entry), so subscribers that come later
read it whole again.

Appends: the new entries of every run of the process share one pipeline (`StreamAppends`).
Sent one run at a time, each batch was a pipeline of its own: one round trip per token per run,
most of its cost redis-py's fixed cost of a pipeline (a connection from the pool, packing,
reading the replies) rather than the entries. Here the batches of all runs that arrive while a
pipeline is on the wire go together in the next one: no timer, so an idle process sends at
once, and a busy one sends fewer, larger pipelines (docs/decisions/0025). Each batch still gets
its own outcome: a command that Redis refuses fails only the batch it belongs to, and a lost
connection fails every batch of that pipeline. Each frame's JSON is orjson's
(`store.db.json_text`).

A run alone pays a pipeline per wake-up of its log (redis-py's fixed cost each), so its own
sends are few: the stream's expiry goes with an append (the active one with the first, the
ended one with the end's entry), and while the run's end is being committed its last entries
wait for the end (`_with_the_end`, bounded) and leave with it. A one-token run costs 2
pipelines (its start's entries; its token's with its end).

Signals: a cancel is published on `CANCEL_CHANNEL` and written to the database flag (durable:
the owner's poll finds it even if Redis is down); every process listens, and the one that runs
the run cancels it within milliseconds instead of a poll interval. Thread events go on
`THREAD_EVENTS_CHANNEL`; each process delivers them to the run it streams on that thread.

Counters: every process shares them (one Lua script checks and takes a start atomically).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from ..auth.subjects import Subject
from ..observability import metrics, outages
from ..protocol import timbal
from ..protocol.clock import new_id, now_ms
from ..protocol.problems import Problem
from ..runs.admission.quotas import (
    DAY_MS,
    MINUTE_MS,
    PROBLEMS,
    CountersUnavailable,
    Exceeded,
)
from ..runs.backend import (
    Backend,
    OnCancel,
    OnThreadEvent,
    OwnedRuns,
    Probe,
    ThreadEvent,
)
from ..runs.log.live import Entry, LiveLog
from ..runs.timings import Timings
from ..store.db import json_text
from ..store.repository import ACTIVE_RUN_STATUSES, UNAVAILABLE, Store
from .database import (
    DatabaseFeed,
    DatabaseSignals,
    database_probe,
    deliver_in_order,
    listen_with_reconnects,
)
from .memory import MemoryCounters

log = logging.getLogger(__name__)


def redis_backend(url: str, store: Store, timings: Timings, slot_ttl_ms: int) -> Backend:
    """Streams, pub/sub and shared counters on the Redis at `url` (closed with the backend)."""
    redis = Redis.from_url(url, socket_connect_timeout=2, health_check_interval=10)
    return Backend("redis", RedisFeed(store, redis, timings), RedisSignals(store, redis, timings),
                   RedisCounters(redis, slot_ttl_ms),
                   (database_probe(store),
                    Probe("redis", Problem.REDIS_UNAVAILABLE, "Redis cannot be reached", redis.ping)),
                   redis.aclose, local_counters=MemoryCounters())


# -- the run feed ---------------------------------------------------------------------------

READ_COUNT = 500
ACTIVE_TTL_SECONDS = 3600  # an owner that died leaves no litter
TTL_REFRESH_SECONDS = 60  # how often a live run's stream has its expiry pushed back
ENDED_TTL_SECONDS = 60  # late subscribers of a finished run are served by the database anyway
RETRY_SECONDS = 0.5
END_GATHER_SECONDS = 0.02  # the most a run's last entries wait for its end's (`_with_the_end`)


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
        ended = False  # the last append carried the run's end, and the ended run's expiry
        live.hold("redis", published)
        try:
            while not stopped():
                batch = live.since(published)
                if (batch and live.ending and not self.appends.busy
                        and not timbal.is_terminal(batch[-1].frame)):
                    batch = await _with_the_end(live, published, batch)
                if batch:
                    now = asyncio.get_running_loop().time()
                    # The end's expiry goes with the end's entry, in its pipeline: one send
                    # less per run than an `EXPIRE` of its own once the log closes.
                    ends = timbal.is_terminal(batch[-1].frame)
                    ttl = (ENDED_TTL_SECONDS if ends
                           else ACTIVE_TTL_SECONDS if now >= expiry_due else None)
                    try:
                        await self.appends.append(key, [
                            (entry.seq, entry.ts, json_text(entry.frame)) for entry in batch],
                            ttl)
                    except (RedisError, OSError) as error:
                        expiry_due = 0.0  # Redis may have restarted empty
                        # The outage is said by the signal listener, which loses its connection
                        # at once (`outages`): a failed append may also be a pooled connection
                        # that died with a Redis that is back already.
                        if healthy:  # the outage itself is logged once (`outages`)
                            log.debug("run %s: Redis unavailable (%s); its subscribers read the "
                                      "database meanwhile", live.run_id, error)
                            healthy = False
                        await asyncio.sleep(RETRY_SECONDS)
                        published = await self._published(key, published)
                        continue
                    published, ended = batch[-1].seq, ends
                    if ends:  # nothing may push the ended run's expiry back
                        expiry_due = float("inf")
                    elif ttl is not None:
                        expiry_due = now + TTL_REFRESH_SECONDS
                    live.hold("redis", published)
                    if not healthy:
                        outages.up("redis")
                        log.debug("run %s: publishing to Redis again", live.run_id)
                        healthy = True
                if live.closed and published >= live.last:
                    break
                await live.wait_beyond(published)
        finally:
            live.release("redis")  # memory may forget what this run published
        if ended:
            return
        try:  # stopped, or entries after the end: the expiry alone, in the shared pipeline
            await self.appends.append(key, [], ENDED_TTL_SECONDS)
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

    async def salvage(self, run_id: str, after: int, limit: int) -> list[Entry]:
        """The run's stream beyond `after`: what followers in other processes were shown of a
        run whose process died before writing it (the reaper saves it before the run's end).
        None if Redis cannot be read (then only what was written is kept)."""
        try:
            with metrics.timed_redis("salvage"):
                reply: Any = await self.redis.xrange(stream_key(run_id), min=f"0-{after + 1}",
                                                     count=limit)
        except (RedisError, OSError) as error:
            log.warning("run %s: its live tail could not be read from Redis (%s); only its "
                        "written log is kept", run_id, error)
            return []
        return [Entry(_seq(entry_id), int(fields[b"ts"]), json.loads(fields[b"f"]))
                for entry_id, fields in reply]

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
            except (RedisError, OSError) as error:  # its readers read the database meanwhile
                log.debug("run %s: reading its stream failed (%s); reading the database",
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
                outages.down("database", f"following run {run_id}: {type(error).__name__}")
        async for entry in self.database.subscribe(run_id, seq):
            yield entry


async def _with_the_end(live: LiveLog, published: int, batch: list[Entry]) -> list[Entry]:
    """`batch` and the run's end, if it comes within `END_GATHER_SECONDS`: the run's end is
    being committed, and its entries would otherwise leave in a pipeline of their own a round
    trip later (a one-token run: 3 pipelines instead of 2). Only while the process's appends
    are idle: on a busy process the pipelines are shared anyway, and the commits are slower
    (a burst of 100 starts: most ends took longer than the bound, each wait a timer and a
    cancellation for nothing). Subscribers in other processes get
    these last entries that much later; the end waits for the commit anyway, and reaches them
    a little later for the entries now read just before it (docs/decisions/0025)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(END_GATHER_SECONDS):
            await live.wait_beyond(batch[-1].seq)
    return live.since(published)


def _seq(entry_id: bytes | str) -> int:
    raw = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(raw.partition("-")[2])


# -- appends ------------------------------------------------------------------------------

Entries = list[tuple[int, int, str]]  # (position, timestamp, frame as JSON) per entry, in order


@dataclass
class _Batch:
    key: str
    entries: Entries
    ttl_seconds: int | None  # refresh the stream's expiry after its entries
    done: asyncio.Future[None] = field(default_factory=lambda: (
        asyncio.get_running_loop().create_future()))


class StreamAppends:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._waiting: list[_Batch] = []
        self._sender: asyncio.Task[None] | None = None

    @property
    def busy(self) -> bool:
        """A pipeline is on the wire: other runs are publishing, and what is appended now
        shares the next pipeline with theirs (a run's own sends cost it little then)."""
        return self._sender is not None and not self._sender.done()

    async def append(self, key: str, entries: Entries, ttl_seconds: int | None = None) -> None:
        """Add `entries` to the stream `key` (each as the entry `0-<position>` with the fields
        `ts` and `f`), then set its expiry to `ttl_seconds` if given; returns once Redis has
        them, raises what Redis raised."""
        batch = _Batch(key, entries, ttl_seconds)
        self._waiting.append(batch)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send(), name="redis stream appends")
        await batch.done

    async def _send(self) -> None:
        while self._waiting:
            batches, self._waiting = self._waiting, []
            pipe = self.redis.pipeline(transaction=False)
            for batch in batches:
                for seq, ts, frame in batch.entries:
                    pipe.xadd(batch.key, {"ts": ts, "f": frame}, id=f"0-{seq}")
                if batch.ttl_seconds is not None:
                    pipe.expire(batch.key, batch.ttl_seconds)
            try:
                with metrics.timed_redis("append"):
                    replies = await pipe.execute(raise_on_error=False)
            except BaseException as error:  # the connection: nothing is known to be there
                for batch in batches:
                    _settle(batch, error)
                if not isinstance(error, Exception):
                    raise  # cancelled with the process: the waiters have their answer
                continue
            at = 0
            for batch in batches:
                count = len(batch.entries) + (batch.ttl_seconds is not None)
                refused = next((r for r in replies[at:at + count] if isinstance(r, Exception)),
                               None)
                at += count
                _settle(batch, refused)


def _settle(batch: _Batch, error: BaseException | None) -> None:
    if batch.done.done():  # its publisher was cancelled meanwhile
        return
    if error is None:
        batch.done.set_result(None)
    elif isinstance(error, asyncio.CancelledError):
        batch.done.cancel()
    else:
        batch.done.set_exception(error)


# -- signals ------------------------------------------------------------------------------

CANCEL_CHANNEL = "gateway:cancel"
THREAD_EVENTS_CHANNEL = "gateway:thread-events"


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
            # Its process will see the database flag; the outage is logged once (`outages`).
            log.debug("cancel of run %s not published to Redis (%s)", run_id, error)
        await self.database.request_cancel(run_id)

    async def publish_thread_event(self, thread_id: str, event: ThreadEvent) -> None:
        try:
            with metrics.timed_redis("publish"):
                await self.redis.publish(THREAD_EVENTS_CHANNEL,
                                         json.dumps({"threadId": thread_id, "event": event}))
        except (RedisError, OSError) as error:
            log.debug("thread event on %s not published (%s)", thread_id, error)

    async def listen(self, owned: OwnedRuns, on_cancel: OnCancel,
                     on_thread_event: OnThreadEvent) -> None:
        await listen_with_reconnects(
            self.database, owned, on_cancel,
            lambda: self._subscribe(owned, on_cancel, on_thread_event),
            (RedisError, OSError), "redis", RETRY_SECONDS)

    async def _subscribe(self, owned: OwnedRuns, on_cancel: OnCancel,
                         on_thread_event: OnThreadEvent) -> None:
        events: asyncio.Queue[tuple[str, ThreadEvent]] = asyncio.Queue()
        delivering = asyncio.create_task(deliver_in_order(events, on_thread_event))
        try:
            async with self.redis.pubsub(ignore_subscribe_messages=True) as pubsub:
                await pubsub.subscribe(CANCEL_CHANNEL, THREAD_EVENTS_CHANNEL)
                outages.up("redis")  # listening again: an outage it reported is over
                async for message in pubsub.listen():
                    if message["channel"] == CANCEL_CHANNEL.encode():
                        run_id = message["data"].decode()
                        if run_id in owned.ids():
                            on_cancel(run_id)
                        continue
                    body = json.loads(message["data"])
                    events.put_nowait((body["threadId"], body["event"]))
        finally:
            delivering.cancel()


# -- counters -----------------------------------------------------------------------------

# KEYS: per subject (slots zset, starts of this minute, tokens of this day), then the zset of
# processes that admitted a start lately. ARGV: ticket, now, slots older than this are stale,
# the start's weight, this process's id, then per subject its three limits. Returns the
# subject over a limit and which, or how many processes admitted a start in `PEERS_MS`.
ACQUIRE = """
local n = (#KEYS - 1) / 3
for i = 0, n - 1 do
  local slots, starts, tokens = KEYS[i*3+1], KEYS[i*3+2], KEYS[i*3+3]
  local concurrent, per_minute, daily = tonumber(ARGV[6+i*3]), tonumber(ARGV[7+i*3]),
    tonumber(ARGV[8+i*3])
  if daily > 0 and tonumber(redis.call('GET', tokens) or '0') >= daily then
    return {i, 'tokens'}
  end
  if per_minute > 0 and tonumber(redis.call('GET', starts) or '0') >= per_minute then
    return {i, 'rate'}
  end
  if concurrent > 0 then
    redis.call('ZREMRANGEBYSCORE', slots, '-inf', ARGV[3])
    if redis.call('ZCARD', slots) >= concurrent then return {i, 'concurrent'} end
  end
end
for i = 0, n - 1 do
  if tonumber(ARGV[6+i*3]) > 0 then
    redis.call('ZADD', KEYS[i*3+1], ARGV[2], ARGV[1])
    redis.call('PEXPIRE', KEYS[i*3+1], ARGV[2] - ARGV[3])
  end
  if tonumber(ARGV[7+i*3]) > 0 then
    redis.call('INCRBY', KEYS[i*3+2], ARGV[4])
    redis.call('PEXPIRE', KEYS[i*3+2], 120000)
  end
end
local peers = KEYS[#KEYS]
redis.call('ZADD', peers, ARGV[2], ARGV[5])
redis.call('ZREMRANGEBYSCORE', peers, '-inf', ARGV[2] - PEERS_MS)
redis.call('PEXPIRE', peers, PEERS_MS)
return redis.call('ZCARD', peers)
"""
# Processes that admitted a start within this long count as sharing the limits (`processes`).
PEERS_MS = 300_000
PREFIX = "gateway:quota:"


class RedisCounters:
    """Counters every process shares, in Redis."""

    def __init__(self, redis: Redis, slot_ttl_ms: int) -> None:
        self.redis, self.slot_ttl_ms = redis, slot_ttl_ms
        self._acquire = redis.register_script(ACQUIRE.replace("PEERS_MS", str(PEERS_MS)))
        self.process = new_id("p_")
        # Processes that admitted starts lately, as Redis last said: how the limits are
        # shared out while it is away (`runs/admission/quotas.py`).
        self.processes = 1

    async def acquire(self, ticket: str, subjects: Sequence[Subject], now: int,
                      weight: int = 1) -> tuple[int, Exceeded] | None:
        keys: list[str] = []
        args: list[Any] = [ticket, now, now - self.slot_ttl_ms, weight, self.process]
        for subject in subjects:
            keys += _keys(subject.name, now)
            args += [subject.limits.concurrent_runs, subject.limits.runs_per_minute,
                     subject.limits.daily_tokens]
        keys.append(f"{PREFIX}processes")
        with _unavailable_as_such():
            result = await self._acquire(keys=keys, args=args)
        if isinstance(result, int):
            self.processes = max(1, result)
            return None
        index, exceeded = result
        name = exceeded.decode() if isinstance(exceeded, bytes) else str(exceeded)
        return int(index), next(kind for kind in PROBLEMS if kind == name)

    async def release(self, ticket: str, subjects: Sequence[Subject]) -> None:
        with _unavailable_as_such():
            async with self.redis.pipeline(transaction=False) as pipe:
                for subject in subjects:
                    pipe.zrem(f"{PREFIX}{subject.name}:slots", ticket)
                await pipe.execute()

    async def add_tokens(self, subjects: Sequence[Subject], tokens: int, now: int) -> None:
        with _unavailable_as_such():
            async with self.redis.pipeline(transaction=False) as pipe:
                for subject in subjects:
                    key = _keys(subject.name, now)[2]
                    pipe.incrby(key, tokens)
                    pipe.pexpire(key, 2 * DAY_MS)
                await pipe.execute()


@contextlib.contextmanager
def _unavailable_as_such() -> Iterator[None]:
    """Redis's own errors, as the quotas know them (`GATEWAY_QUOTA_OUTAGE` decides)."""
    try:
        yield
    except RedisError as error:
        raise CountersUnavailable(str(error)) from error


def _keys(name: str, now: int) -> list[str]:
    return [f"{PREFIX}{name}:slots", f"{PREFIX}{name}:starts:{now // MINUTE_MS}",
            f"{PREFIX}{name}:tokens:{now // DAY_MS}"]
