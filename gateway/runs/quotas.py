"""Quotas: runs per minute, concurrent runs and tokens per day, per API key and per user scope.

A run start takes a `Ticket` before it is admitted: one check of every subject's counters and,
if all pass, one increment of each, atomically (one Lua script in Redis; one step of the event
loop in memory). The ticket holds the run's concurrency slots until the run ends, whichever way
it ends (`execution` releases it in its `finally`), and adds the tokens the model reports.

With Redis (`GATEWAY_REDIS_URL`) every process shares the counters. A slot of a process that
died without releasing it expires after the longest a run may live (`GATEWAY_RUN_MAX_SECONDS`)
plus the lease, so a crash cannot lock a key out for longer. Without Redis the counters are in
memory: exact for one process; several processes each count their own runs.

Windows: runs per minute use a fixed window (the wall-clock minute); tokens a UTC day.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from redis.exceptions import RedisError

from ..observability import metrics
from ..protocol.clock import new_id, now_ms
from ..protocol.problems import ApiError

log = logging.getLogger(__name__)

MINUTE_MS = 60_000
DAY_MS = 86_400_000
# A client refused for concurrency cannot know when a run ends; it may look again this soon.
CONCURRENCY_RETRY_SECONDS = 1
Kind = Literal["apiKey", "user"]
Exceeded = Literal["tokens", "rate", "concurrent"]


@dataclass(frozen=True)
class Limits:
    """0 means no limit."""

    concurrent_runs: int = 0
    runs_per_minute: int = 0
    daily_tokens: int = 0

    @property
    def any(self) -> bool:
        return bool(self.concurrent_runs or self.runs_per_minute or self.daily_tokens)


@dataclass(frozen=True)
class Subject:
    """Who a limit is counted for: an API key, or a user scope of a project."""

    kind: Kind
    name: str  # stable and free of secrets: a key id, or a hash of project and scope
    limits: Limits


def key_subject(key_id: str, limits: Limits) -> Subject:
    return Subject("apiKey", f"key:{key_id}", limits)


def user_subject(project: str, scope: str, limits: Limits) -> Subject:
    digest = hashlib.sha256(f"{project}\0{scope}".encode()).hexdigest()[:24]
    return Subject("user", f"user:{digest}", limits)


CODES: dict[Exceeded, str] = {"tokens": "TOKEN_BUDGET_EXCEEDED", "rate": "RATE_LIMITED",
                              "concurrent": "TOO_MANY_CONCURRENT_RUNS"}


def refusal(subject: Subject, exceeded: Exceeded, now: int) -> "QuotaExceeded":
    """The 429 for a subject over one of its limits, with the wait until it may pass."""
    who = "this API key" if subject.kind == "apiKey" else "this user"
    if exceeded == "tokens":
        limit, wait_ms = subject.limits.daily_tokens, DAY_MS - now % DAY_MS
        detail = f"The daily token budget of {who} ({limit} tokens) is spent"
    elif exceeded == "rate":
        limit, wait_ms = subject.limits.runs_per_minute, MINUTE_MS - now % MINUTE_MS
        detail = f"{who.capitalize()} may start {limit} runs per minute"
    else:
        limit, wait_ms = subject.limits.concurrent_runs, CONCURRENCY_RETRY_SECONDS * 1000
        detail = f"{who.capitalize()} may have {limit} runs at once; wait for one to end"
    retry = max(1, math.ceil(wait_ms / 1000))
    code = CODES[exceeded]
    metrics.REFUSALS.labels(code).inc()
    return QuotaExceeded(code, f"{detail}; retry after {retry} s", retry, limit=limit,
                         limitScope=subject.kind, retryAfter=retry)


class QuotaExceeded(ApiError):
    """A 429; `headers` go on the response (`Retry-After`)."""

    def __init__(self, code: str, detail: str, retry_after: int, **extra: Any) -> None:
        super().__init__(429, code, detail, **extra)
        self.headers = {"Retry-After": str(retry_after)}


class Counters(Protocol):
    async def acquire(self, ticket: str, subjects: Sequence[Subject],
                      now: int) -> tuple[int, Exceeded] | None:
        """Take a slot and a start for every subject, or none and say which is over."""
        ...

    async def release(self, ticket: str, subjects: Sequence[Subject]) -> None: ...

    async def add_tokens(self, subjects: Sequence[Subject], tokens: int, now: int) -> None: ...


@dataclass
class MemoryCounters:
    """One process's counters; exact for a single process. A window's counts are dropped when
    the next window begins, so subjects seen once (every user scope) are not kept forever."""

    running: dict[str, set[str]] = field(default_factory=dict)
    starts: dict[str, tuple[int, int]] = field(default_factory=dict)  # (minute, count)
    tokens: dict[str, tuple[int, int]] = field(default_factory=dict)  # (day, count)
    windows: tuple[int, int] = (0, 0)  # the (minute, day) the counts were last pruned in

    def _prune(self, minute: int, day: int) -> None:
        if self.windows[0] != minute:
            self.starts = {n: c for n, c in self.starts.items() if c[0] == minute}
        if self.windows[1] != day:
            self.tokens = {n: c for n, c in self.tokens.items() if c[0] == day}
        self.windows = (minute, day)

    async def acquire(self, ticket: str, subjects: Sequence[Subject],
                      now: int) -> tuple[int, Exceeded] | None:
        minute, day = now // MINUTE_MS, now // DAY_MS
        self._prune(minute, day)
        for index, subject in enumerate(subjects):
            limits = subject.limits
            if limits.daily_tokens and _in(self.tokens, subject.name, day) >= limits.daily_tokens:
                return index, "tokens"
            if (limits.runs_per_minute
                    and _in(self.starts, subject.name, minute) >= limits.runs_per_minute):
                return index, "rate"
            if (limits.concurrent_runs
                    and len(self.running.get(subject.name, ())) >= limits.concurrent_runs):
                return index, "concurrent"
        for subject in subjects:
            if subject.limits.concurrent_runs:
                self.running.setdefault(subject.name, set()).add(ticket)
            if subject.limits.runs_per_minute:
                self.starts[subject.name] = (minute, _in(self.starts, subject.name, minute) + 1)
        return None

    async def release(self, ticket: str, subjects: Sequence[Subject]) -> None:
        for subject in subjects:
            running = self.running.get(subject.name)
            if running is not None:
                running.discard(ticket)
                if not running:
                    del self.running[subject.name]

    async def add_tokens(self, subjects: Sequence[Subject], tokens: int, now: int) -> None:
        day = now // DAY_MS
        for subject in subjects:
            self.tokens[subject.name] = (day, _in(self.tokens, subject.name, day) + tokens)


def _in(counts: dict[str, tuple[int, int]], name: str, window: int) -> int:
    counted = counts.get(name)
    return counted[1] if counted is not None and counted[0] == window else 0


# KEYS: per subject (slots zset, starts of this minute, tokens of this day).
# ARGV: ticket, now, slots older than this are stale, then per subject its three limits.
ACQUIRE = """
local n = #KEYS / 3
for i = 0, n - 1 do
  local slots, starts, tokens = KEYS[i*3+1], KEYS[i*3+2], KEYS[i*3+3]
  local concurrent, per_minute, daily = tonumber(ARGV[4+i*3]), tonumber(ARGV[5+i*3]),
    tonumber(ARGV[6+i*3])
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
  if tonumber(ARGV[4+i*3]) > 0 then
    redis.call('ZADD', KEYS[i*3+1], ARGV[2], ARGV[1])
    redis.call('PEXPIRE', KEYS[i*3+1], ARGV[2] - ARGV[3])
  end
  if tonumber(ARGV[5+i*3]) > 0 then
    redis.call('INCR', KEYS[i*3+2])
    redis.call('PEXPIRE', KEYS[i*3+2], 120000)
  end
end
return false
"""
PREFIX = "gateway:quota:"


class RedisCounters:
    """Counters every process shares, in Redis."""

    def __init__(self, redis: Any, slot_ttl_ms: int) -> None:
        self.redis, self.slot_ttl_ms = redis, slot_ttl_ms
        self._acquire = redis.register_script(ACQUIRE)

    async def acquire(self, ticket: str, subjects: Sequence[Subject],
                      now: int) -> tuple[int, Exceeded] | None:
        keys: list[str] = []
        args: list[Any] = [ticket, now, now - self.slot_ttl_ms]
        for subject in subjects:
            keys += _keys(subject.name, now)
            args += [subject.limits.concurrent_runs, subject.limits.runs_per_minute,
                     subject.limits.daily_tokens]
        result = await self._acquire(keys=keys, args=args)
        if not result:
            return None
        index, exceeded = result
        name = exceeded.decode() if isinstance(exceeded, bytes) else str(exceeded)
        return int(index), next(kind for kind in CODES if kind == name)

    async def release(self, ticket: str, subjects: Sequence[Subject]) -> None:
        async with self.redis.pipeline(transaction=False) as pipe:
            for subject in subjects:
                pipe.zrem(f"{PREFIX}{subject.name}:slots", ticket)
            await pipe.execute()

    async def add_tokens(self, subjects: Sequence[Subject], tokens: int, now: int) -> None:
        async with self.redis.pipeline(transaction=False) as pipe:
            for subject in subjects:
                key = _keys(subject.name, now)[2]
                pipe.incrby(key, tokens)
                pipe.pexpire(key, 2 * DAY_MS)
            await pipe.execute()


def _keys(name: str, now: int) -> list[str]:
    return [f"{PREFIX}{name}:slots", f"{PREFIX}{name}:starts:{now // MINUTE_MS}",
            f"{PREFIX}{name}:tokens:{now // DAY_MS}"]


@dataclass
class Ticket:
    """A run's admission under its subjects' quotas: release it once when the run ends."""

    quotas: "Quotas"
    subjects: Sequence[Subject]
    id: str = field(default_factory=lambda: new_id("q_"))
    released: bool = False

    async def release(self) -> None:
        if self.released or not self.subjects:
            return
        self.released = True
        try:
            await self.quotas.counters.release(self.id, self.subjects)
        except (RedisError, OSError) as error:  # the slot expires by itself (module doc)
            log.warning("could not release quota slot %s (%s)", self.id, error)

    @property
    def counts_tokens(self) -> bool:
        return any(s.kind == "apiKey" for s in self.subjects)

    async def add_tokens(self, tokens: int) -> None:
        counted = [s for s in self.subjects if s.kind == "apiKey"]
        if not counted or tokens <= 0:
            return
        try:
            await self.quotas.counters.add_tokens(counted, tokens, now_ms())
        except (RedisError, OSError) as error:
            log.warning("tokens of quota %s not counted (%s)", self.id, error)


NO_QUOTA: tuple[Subject, ...] = ()


class Quotas:
    def __init__(self, counters: Counters) -> None:
        self.counters = counters

    async def acquire(self, subjects: Sequence[Subject]) -> Ticket:
        """A ticket for a new run, or the 429 `ApiError` of the first limit it is over.

        If the shared counters cannot be reached, the run is let through (and logged): an
        outage of Redis should not stop every run."""
        subjects = [s for s in subjects if s.limits.any]
        ticket = Ticket(self, subjects)
        if not subjects:
            return ticket
        now = now_ms()
        try:
            over = await self.counters.acquire(ticket.id, subjects, now)
        except (RedisError, OSError) as error:
            log.warning("quota counters unreachable (%s); admitting the run unchecked", error)
            return ticket
        if over is not None:
            ticket.released = True
            raise refusal(subjects[over[0]], over[1], now)
        return ticket
