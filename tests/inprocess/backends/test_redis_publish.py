"""A run's publisher on a real Redis (`RedisFeed.publish`): its live log reaches the run's
stream whole and in order; the stream's expiry is the active one while the run goes on and the
ended one after; the end's expiry leaves in the pipeline of the end's entry, not in one of its
own; with Redis away the run goes on, and its stream is whole once Redis is back."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from typing import Any

import pytest
from redis.asyncio import Redis

from gateway.backends.redis import (
    ACTIVE_TTL_SECONDS,
    ENDED_TTL_SECONDS,
    RedisFeed,
    StreamAppends,
    stream_key,
)
from gateway.protocol import timbal
from gateway.runs.log.live import LiveLog
from gateway.runs.timings import Timings
from gateway.store.repository import Store

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None,
                                reason="redis-server not installed")


@pytest.fixture
def pipelines(redis: Redis, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The commands of each pipeline the `redis` client sends, by name."""
    sent: list[list[str]] = []
    pipeline = redis.pipeline

    def counted(*args: Any, **kwargs: Any) -> Any:
        pipe = pipeline(*args, **kwargs)
        execute = pipe.execute

        async def execute_counted(*args: Any, **kwargs: Any) -> Any:
            sent.append([str(command[0]) for command, _ in pipe.command_stack])
            return await execute(*args, **kwargs)

        pipe.execute = execute_counted
        return pipe

    monkeypatch.setattr(redis, "pipeline", counted)
    return sent


async def settled(live: LiveLog, feed: RedisFeed, redis: Redis) -> None:
    """Until the publisher has the log's last entry in the stream."""
    for _ in range(500):
        stream = await redis.xrevrange(stream_key(live.run_id), count=1)
        if stream and stream[0][0] == f"0-{live.last}".encode():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the stream never caught up with the log")


async def publishing_run(store: Store, redis: Redis, run_id: str,
                         stopped: Callable[[], bool] = lambda: False
                         ) -> tuple[RedisFeed, LiveLog, asyncio.Task[None]]:
    """A run's publisher, its log begun (`RUN_STARTED`, in the stream by now)."""
    feed, live = RedisFeed(store, redis, Timings()), LiveLog(run_id)
    publishing = asyncio.create_task(feed.publish(live, stopped))
    live.append({"c": timbal.RUN_STARTED})
    await settled(live, feed, redis)
    return feed, live, publishing


def token(text: str) -> timbal.Frame:
    return {"c": "append", "i": "m1", "v": text}


async def test_a_run_reaches_its_stream_and_its_end_brings_the_ended_expiry(
        store: Store, redis: Redis, pipelines: list[list[str]]) -> None:
    feed, live, publishing = await publishing_run(store, redis, "run-1")
    key = stream_key("run-1")
    assert ENDED_TTL_SECONDS < await redis.ttl(key) <= ACTIVE_TTL_SECONDS  # the run is live
    for text in ("Hel", "lo"):
        live.append(token(text))
        await settled(live, feed, redis)
    live.extend([live.next_entry({"c": timbal.RUN_FINISHED})])  # as `RunRecorder.finish`
    await asyncio.sleep(0)
    live.close()  # as `RunRecorder.close`, after the end
    await asyncio.wait_for(publishing, 5)

    stream = await redis.xrange(key)
    assert [entry_id for entry_id, _ in stream] == [b"0-1", b"0-2", b"0-3", b"0-4"]
    assert [timbal.is_terminal(json.loads(f[b"f"])) for _, f in stream] == [
        False, False, False, True]
    assert 0 < await redis.ttl(key) <= ENDED_TTL_SECONDS
    # One pipeline per wake-up of the log, the end's expiry in the end's: none of its own.
    assert pipelines == [["XADD", "EXPIRE"], ["XADD"], ["XADD"], ["XADD", "EXPIRE"]]


async def test_a_stopped_publisher_still_sets_the_ended_expiry(
        store: Store, redis: Redis, pipelines: list[list[str]]) -> None:
    stopped = False
    _, live, publishing = await publishing_run(store, redis, "run-2", lambda: stopped)
    stopped = True  # taken over by another process, which owns the run's end
    live.append(token("x"))
    await asyncio.wait_for(publishing, 5)
    assert 0 < await redis.ttl(stream_key("run-2")) <= ENDED_TTL_SECONDS
    assert pipelines[-1] == ["EXPIRE"]


async def test_a_run_goes_on_without_redis_and_its_stream_is_whole_once_back(
        store: Store, redis: Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gateway.backends.redis.RETRY_SECONDS", 0.01)
    feed, live, publishing = await publishing_run(store, redis, "run-3")
    await redis.delete(stream_key("run-3"))  # as after a restart of Redis, empty
    real = feed.appends.append
    down = True

    async def refused(*args: Any, **kwargs: Any) -> None:
        if down:
            raise ConnectionError("Redis is away")
        await real(*args, **kwargs)

    monkeypatch.setattr(feed.appends, "append", refused)
    live.append(token("a"))
    live.extend([live.next_entry({"c": timbal.RUN_FINISHED})])
    live.close()  # the run ended while Redis was away
    await asyncio.sleep(0.05)
    assert not publishing.done()  # still trying
    down = False
    await asyncio.wait_for(publishing, 5)
    stream = await redis.xrange(stream_key("run-3"))
    assert [entry_id for entry_id, _ in stream] == [b"0-1", b"0-2", b"0-3"]
    assert 0 < await redis.ttl(stream_key("run-3")) <= ENDED_TTL_SECONDS


async def test_a_runs_last_entries_leave_with_its_end(
        store: Store, redis: Redis, pipelines: list[list[str]]) -> None:
    feed, live, publishing = await publishing_run(store, redis, "run-4")
    live.append(token("last"))
    live.ending = True  # as `RunRecorder.finish` while its commit is under way
    await asyncio.sleep(0.005)
    assert await redis.xlen(stream_key("run-4")) == 1  # the token waits for the end...
    live.extend([live.next_entry({"c": timbal.RUN_FINISHED})])
    live.close()
    await asyncio.wait_for(publishing, 5)
    # ... and both leave in one pipeline, with the ended run's expiry
    assert pipelines == [["XADD", "EXPIRE"], ["XADD", "XADD", "EXPIRE"]]
    assert [i for i, _ in await redis.xrange(stream_key("run-4"))] == [b"0-1", b"0-2", b"0-3"]
    assert 0 < await redis.ttl(stream_key("run-4")) <= ENDED_TTL_SECONDS


async def test_a_runs_last_entries_wait_for_its_end_only_so_long(
        store: Store, redis: Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gateway.backends.redis.END_GATHER_SECONDS", 0.05)
    feed, live, publishing = await publishing_run(store, redis, "run-5")
    live.append(token("last"))
    live.ending = True  # an end whose commit does not come back (the database away)
    await settled(live, feed, redis)  # the token went on its own
    live.close()
    await asyncio.wait_for(publishing, 5)
    assert [i for i, _ in await redis.xrange(stream_key("run-5"))] == [b"0-1", b"0-2"]
    assert 0 < await redis.ttl(stream_key("run-5")) <= ENDED_TTL_SECONDS


async def test_on_a_busy_process_a_runs_last_entries_do_not_wait(
        store: Store, redis: Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    # Other runs' pipeline on the wire: what this run appends shares their next one anyway.
    monkeypatch.setattr(StreamAppends, "busy", property(lambda _self: True))
    monkeypatch.setattr("gateway.backends.redis.END_GATHER_SECONDS", 10)  # were it to wait
    feed, live, publishing = await publishing_run(store, redis, "run-6")
    live.append(token("last"))
    live.ending = True
    await settled(live, feed, redis)  # sent without waiting for the end
    live.extend([live.next_entry({"c": timbal.RUN_FINISHED})])
    live.close()
    await asyncio.wait_for(publishing, 5)
    assert [i for i, _ in await redis.xrange(stream_key("run-6"))] == [b"0-1", b"0-2", b"0-3"]
