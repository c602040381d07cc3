"""The Redis counters: two processes' counters on one real Redis share every limit, and the
slot of a process that died expires on its own."""

from __future__ import annotations

import asyncio
import shutil
import socket

import pytest
from redis.asyncio import Redis

from gateway.auth.subjects import Limits, key_subject
from gateway.backends.memory import MemoryCounters
from gateway.backends.redis import RedisCounters
from gateway.observability import metrics
from gateway.protocol.clock import now_ms
from gateway.protocol.problems import ApiError
from gateway.runs.admission.quotas import QuotaExceeded, Quotas
from tests.support.engines import RedisServer

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None,
                                reason="redis-server not installed")


async def test_two_processes_share_a_concurrency_limit(redis: Redis) -> None:
    one, two = (Quotas(RedisCounters(redis, slot_ttl_ms=60_000)) for _ in range(2))
    subjects = [key_subject("shared", Limits(concurrent_runs=2, runs_per_minute=100))]
    first = await one.acquire(subjects)
    await two.acquire(subjects)
    for quotas in (one, two):
        with pytest.raises(QuotaExceeded) as third:
            await quotas.acquire(subjects)
        assert third.value.code == "TOO_MANY_CONCURRENT_RUNS"
    await first.release()
    await two.acquire(subjects)  # the freed slot, taken by the other process


async def test_runs_per_minute_and_tokens_are_shared(redis: Redis) -> None:
    one, two = (Quotas(RedisCounters(redis, slot_ttl_ms=60_000)) for _ in range(2))
    rate = [key_subject("rate", Limits(runs_per_minute=2))]
    await (await one.acquire(rate)).release()
    await (await two.acquire(rate)).release()
    with pytest.raises(QuotaExceeded) as over:
        await one.acquire(rate)
    assert over.value.code == "RATE_LIMITED" and 1 <= int(over.value.headers["Retry-After"]) <= 60
    budget = [key_subject("budget", Limits(daily_tokens=100))]
    ticket = await one.acquire(budget)
    await ticket.add_tokens(100)
    await ticket.release()
    with pytest.raises(QuotaExceeded) as spent:
        await two.acquire(budget)
    assert spent.value.code == "TOKEN_BUDGET_EXCEEDED"


async def test_a_dead_processs_slot_expires(redis: Redis) -> None:
    dead = Quotas(RedisCounters(redis, slot_ttl_ms=1))  # its slots are stale at once
    subjects = [key_subject("crashed", Limits(concurrent_runs=1))]
    await dead.acquire(subjects)  # never released: the process "died"
    await asyncio.sleep(0.01)
    await dead.acquire(subjects)  # the stale slot was dropped


def unreachable() -> Redis:
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    return Redis.from_url(f"redis://127.0.0.1:{port}/0", socket_connect_timeout=1)


async def test_an_outage_checks_starts_against_this_processs_share(
        redis_server: RedisServer) -> None:
    """With Redis gone, a key's runs per minute still hold (`local`): this process's own
    count of what it admitted goes on, against its share of the limit among the processes
    Redis last saw. Once Redis is back, the tokens it could not take are added to it."""
    redis = Redis.from_url(redis_server.url, socket_connect_timeout=1)
    await redis.flushdb()
    other = Quotas(RedisCounters(redis, slot_ttl_ms=60_000), MemoryCounters())
    quotas = Quotas(RedisCounters(redis, slot_ttl_ms=60_000), MemoryCounters())
    rate = [key_subject("outage", Limits(runs_per_minute=4, daily_tokens=1000))]
    while now_ms() % 60_000 > 50_000:  # the starts below fall in one minute
        await asyncio.sleep(1)
    await (await other.acquire(rate)).release()  # two processes admit starts
    held = await quotas.acquire(rate)
    assert quotas.counters.processes == 2
    before = metrics.QUOTA_OUTAGE_ADMISSIONS.labels("local")._value.get()
    redis_server.stop()
    try:
        await held.add_tokens(300)  # a run admitted before the outage ends during it
        # This process's share is 2 starts of 4: it took one before the outage.
        await (await quotas.acquire(rate)).release()
        with pytest.raises(QuotaExceeded) as over:
            await quotas.acquire(rate)
        assert over.value.code == "RATE_LIMITED"
        assert metrics.QUOTA_OUTAGE_ADMISSIONS.labels("local")._value.get() == before + 1
    finally:
        redis_server.start()  # on the same port, empty
    await redis.flushdb()  # an empty Redis after a restart: what it had is gone anyway
    await (await quotas.acquire([key_subject("other", Limits(runs_per_minute=9))])).release()
    assert int(await redis.get(f"gateway:quota:key:outage:tokens:{now_ms() // 86_400_000}")
               or 0) == 300
    await redis.aclose()


async def test_an_outage_can_refuse_or_admit_every_start() -> None:
    redis = unreachable()
    subjects = [key_subject("k", Limits(concurrent_runs=1))]
    try:
        with pytest.raises(ApiError) as refused:
            await Quotas(RedisCounters(redis, 60_000), MemoryCounters(), "refuse").acquire(
                subjects)
        assert refused.value.code == "QUOTAS_UNAVAILABLE" and refused.value.status == 503
        admitting = Quotas(RedisCounters(redis, 60_000), MemoryCounters(), "admit")
        before = metrics.QUOTA_OUTAGE_ADMISSIONS.labels("admit")._value.get()
        for _ in range(3):  # over the limit of one: unchecked
            ticket = await admitting.acquire(subjects)
            await ticket.add_tokens(10)
        await ticket.release()
        assert metrics.QUOTA_OUTAGE_ADMISSIONS.labels("admit")._value.get() == before + 3
    finally:
        await redis.aclose()
