"""The process's Redis stream appends on a real Redis: every run's entries land in its own
stream, in order and byte for byte (packed by the gateway, not redis-py); appends made while a
pipeline is on the wire share the next one; a command Redis refuses fails only the run it
belongs to; a connection lost midway leaves none behind with replies pending."""

from __future__ import annotations

import asyncio
import shutil
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from gateway.backends.redis import StreamAppends

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None,
                                reason="redis-server not installed")


@pytest.fixture
def pipelines(redis: Redis, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The pipelines (writes of commands) the `redis` client's connections send."""
    sent: list[Any] = []
    pool = redis.connection_pool
    get = pool.get_connection

    async def counted(*args: Any, **kwargs: Any) -> Any:
        connection = await get(*args, **kwargs)
        sent.append(connection)
        return connection

    monkeypatch.setattr(pool, "get_connection", counted)
    return sent


def entries(run: int, first: int, count: int) -> list[tuple[int, int, str]]:
    return [(seq, 1000 + seq, f"run {run} entry {seq} ✓") for seq in range(first, first + count)]


async def test_many_runs_share_pipelines_and_keep_their_order(redis: Redis,
                                                              pipelines: list[Any]) -> None:
    appends = StreamAppends(redis)

    async def run(number: int) -> None:
        for first in range(1, 31, 3):  # ten batches of three entries, one after the other
            await appends.append(f"run:{number}", entries(number, first, 3),
                                 ttl_seconds=600 if first == 1 else None)

    await asyncio.gather(*(run(n) for n in range(20)))
    for number in range(20):
        stream = await redis.xrange(f"run:{number}")
        assert [entry_id for entry_id, _ in stream] == [f"0-{s}".encode() for s in range(1, 31)]
        assert [fields for _, fields in stream] == [
            {b"ts": b"%d" % (1000 + s), b"f": f"run {number} entry {s} ✓".encode()}
            for s in range(1, 31)]
        assert 0 < await redis.ttl(f"run:{number}") <= 600
    # 200 batches; one pipeline each would be 200
    assert len(pipelines) <= 100, len(pipelines)


async def test_a_refused_entry_fails_only_its_own_run(redis: Redis) -> None:
    await redis.xadd("ahead", {"f": "already here"}, id="0-5")
    appends = StreamAppends(redis)
    behind = asyncio.ensure_future(appends.append("ahead", entries(1, 3, 1)))
    fine = asyncio.ensure_future(appends.append("fine", entries(2, 1, 2)))
    with pytest.raises(ResponseError):
        await behind
    await fine
    assert [i for i, _ in await redis.xrange("fine")] == [b"0-1", b"0-2"]
    assert [i for i, _ in await redis.xrange("ahead")] == [b"0-5"]
    await appends.append("ahead", entries(1, 6, 1))  # the next append of that run goes through
    assert [i for i, _ in await redis.xrange("ahead")] == [b"0-5", b"0-6"]


async def test_a_lost_connection_fails_every_waiting_append() -> None:
    dead = Redis(host="127.0.0.1", port=1, socket_connect_timeout=1)  # nobody listens there
    appends = StreamAppends(dead)
    results = await asyncio.gather(*(appends.append(f"run:{n}", entries(n, 1, 1))
                                     for n in range(3)), return_exceptions=True)
    # what the run's publisher catches: it then reads the database and retries
    assert all(isinstance(r, (RedisError, OSError)) for r in results), results
    await dead.aclose()


async def test_appends_go_on_after_their_connection_was_closed(redis: Redis) -> None:
    appends = StreamAppends(redis)
    await appends.append("run:1", entries(1, 1, 1))
    await redis.client_kill_filter(_type="normal", skipme=True)  # every other connection
    await appends.append("run:1", entries(1, 2, 2))
    assert [i for i, _ in await redis.xrange("run:1")] == [b"0-1", b"0-2", b"0-3"]


async def test_a_runs_end_sets_only_its_streams_expiry(redis: Redis) -> None:
    appends = StreamAppends(redis)
    await appends.append("run:1", entries(1, 1, 2), ttl_seconds=3600)
    await appends.append("run:1", [], 60)  # what a run's publisher sends once it ended
    assert 0 < await redis.ttl("run:1") <= 60
    assert [i for i, _ in await redis.xrange("run:1")] == [b"0-1", b"0-2"]
