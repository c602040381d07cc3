"""The Redis counters: two processes' counters on one real Redis share every limit, and the
slot of a process that died expires on its own."""

from __future__ import annotations

import asyncio
import shutil
import socket

import pytest
from redis.asyncio import Redis

from gateway.auth.subjects import Limits, key_subject
from gateway.backends.redis import RedisCounters
from gateway.runs.admission.quotas import QuotaExceeded, Quotas

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


async def test_counters_that_cannot_be_reached_let_runs_through() -> None:
    """An outage of Redis must not stop every run: the start is admitted unchecked, and its
    release and tokens are dropped (the slot would expire by itself)."""
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    redis = Redis.from_url(f"redis://127.0.0.1:{port}/0", socket_connect_timeout=1)
    try:
        quotas = Quotas(RedisCounters(redis, slot_ttl_ms=60_000))
        ticket = await quotas.acquire([key_subject("k", Limits(concurrent_runs=1))])
        await ticket.add_tokens(10)
        await ticket.release()
        assert ticket.released
    finally:
        await redis.aclose()
