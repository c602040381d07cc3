"""How this process reaches the others: a run feed and signals, over Redis or the database."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..runs.feed import RunFeed
from ..runs.signals import DatabaseSignals, Signals
from ..runs.timings import Timings
from ..store.repository import Store
from .database import DatabaseFeed


@dataclass(frozen=True)
class Fanout:
    feed: RunFeed
    signals: Signals
    close: Callable[[], Awaitable[None]]
    redis: Any = None  # the Redis client, when there is one (quotas count in it, `/ready` pings it)


async def _nothing() -> None:
    return None


def fanout_over(redis_url: str | None, store: Store, timings: Timings) -> Fanout:
    """Redis streams and pub/sub with `redis_url`; else database polling for run feeds and,
    on PostgreSQL, LISTEN/NOTIFY for signals (on SQLite, the database flag alone: one
    process, or a few sharing a file)."""
    if not redis_url:
        url = store.engine.url
        if url.get_backend_name() == "postgresql":
            from .postgres import PostgresSignals

            dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
            return Fanout(DatabaseFeed(store, timings), PostgresSignals(store, dsn, timings),
                          _nothing)
        return Fanout(DatabaseFeed(store, timings), DatabaseSignals(store, timings), _nothing)
    from redis.asyncio import Redis

    from ..runs.signals_redis import RedisSignals
    from .redis import RedisFeed

    redis = Redis.from_url(redis_url, socket_connect_timeout=2, health_check_interval=10)
    return Fanout(RedisFeed(store, redis, timings), RedisSignals(store, redis, timings),
                  redis.aclose, redis)
