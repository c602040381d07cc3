"""One Redis pipeline for the new entries of every run of the process.

Each run's publisher appends what its live log gained to the run's stream. Sent one run at a
time, each batch was a pipeline of its own: at 50 tokens a second, one round trip per token
per run, 90 to 140 µs of this process's CPU each, most of it redis-py's fixed cost of a
pipeline (a connection from the pool, packing, reading the replies) rather than the entries.
Here the batches of all runs that arrive while a pipeline is on the wire go together in the
next one: no timer, so an idle process sends at once, and a busy one sends fewer, larger
pipelines (50 runs publishing token by token: 26 µs an entry instead of 88,
`bench/redis_appends.py`).

Each batch still gets its own outcome: a command that Redis refuses fails only the batch it
belongs to, and a lost connection fails every batch of that pipeline, as it would have alone.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from redis.asyncio import Redis
from redis.typing import EncodableT, FieldT

from ..observability import metrics

Entries = list[tuple[str, dict[FieldT, EncodableT]]]  # (entry id, fields) per entry, in order


@dataclass
class _Batch:
    key: str
    fields: Entries
    ttl_seconds: int | None  # refresh the stream's expiry after its entries
    done: asyncio.Future[None] = field(default_factory=lambda: (
        asyncio.get_running_loop().create_future()))


class StreamAppends:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._waiting: list[_Batch] = []
        self._sender: asyncio.Task[None] | None = None

    async def append(self, key: str, entries: Entries, ttl_seconds: int | None = None) -> None:
        """Add `entries` (entry id and fields each) to the stream `key`, then set its expiry
        to `ttl_seconds` if given; returns once Redis has them, raises what Redis raised."""
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
                for entry_id, fields in batch.fields:
                    pipe.xadd(batch.key, fields, id=entry_id)
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
                count = len(batch.fields) + (batch.ttl_seconds is not None)
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
