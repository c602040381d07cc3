"""Quotas: runs per minute, concurrent runs and tokens per day, per API key, per user scope and
per Chorus connection string (a credential too: `dialects/chorus`).

A run start takes a `Ticket` before it is admitted: one check of every subject's counters and,
if all pass, one increment of each, atomically (one Lua script in Redis; one step of the event
loop in memory). The ticket holds the run's concurrency slots until the run ends, whichever way
it ends (`execution` releases it in its `finally`), and adds the tokens the model reports.

The counters are the backend's (`Counters`, `backend.Backend.counters`): with Redis (`GATEWAY_REDIS_URL`) every
process shares them (`backends/redis.py`); a slot of a process that died without releasing it
expires after the longest a run may live (`GATEWAY_RUN_MAX_SECONDS`) plus the lease, so a crash
cannot lock a key out for longer. Without Redis they are in memory (`backends/memory.py`):
exact for one process; several processes each count their own runs.

Windows: runs per minute use a fixed window (the wall-clock minute); tokens a UTC day.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ...auth.subjects import Subject
from ...observability import metrics
from ...protocol.clock import new_id, now_ms
from ...protocol.problems import ApiError, Problem

log = logging.getLogger(__name__)

MINUTE_MS = 60_000
DAY_MS = 86_400_000
# A client refused for concurrency cannot know when a run ends; it may look again this soon.
CONCURRENCY_RETRY_SECONDS = 1
# Subjects whose runs' tokens count against a daily budget (a user scope has none).
TOKEN_KINDS = ("apiKey", "chorus")
Exceeded = Literal["tokens", "rate", "concurrent"]


WHO = {"apiKey": "this API key", "user": "this user", "chorus": "this connection string"}
PROBLEMS: dict[Exceeded, Problem] = {"tokens": Problem.TOKEN_BUDGET_EXCEEDED,
                                     "rate": Problem.RATE_LIMITED,
                                     "concurrent": Problem.TOO_MANY_CONCURRENT_RUNS}


def refusal(subject: Subject, exceeded: Exceeded, now: int) -> "QuotaExceeded":
    """The 429 for a subject over one of its limits, with the wait until it may pass."""
    who = WHO[subject.kind]
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
    kind = PROBLEMS[exceeded]
    metrics.REFUSALS.labels(kind.name).inc()
    return QuotaExceeded(kind, f"{detail}; retry after {retry} s", retry, limit=limit,
                         limitScope=subject.kind, retryAfter=retry)


class CountersUnavailable(Exception):
    """Shared counters that cannot be reached: a run is let through unchecked, a slot expires
    by itself (the backend raises it for its own connection errors)."""


class QuotaExceeded(ApiError):
    """A 429; `headers` go on the response (`Retry-After`)."""

    def __init__(self, kind: Problem, detail: str, retry_after: int, **extra: Any) -> None:
        super().__init__(kind, detail, **extra)
        self.headers = {"Retry-After": str(retry_after)}


class Counters(Protocol):
    """A backend's quota counters (`runs.backend`): one process's, or every process's."""

    async def acquire(self, ticket: str, subjects: Sequence[Subject],
                      now: int) -> tuple[int, Exceeded] | None:
        """Take a slot and a start for every subject, or none and say which is over."""
        ...

    async def release(self, ticket: str, subjects: Sequence[Subject]) -> None: ...

    async def add_tokens(self, subjects: Sequence[Subject], tokens: int, now: int) -> None: ...


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
        except (CountersUnavailable, OSError) as error:  # the slot expires by itself (module doc)
            log.warning("could not release quota slot %s (%s)", self.id, error)

    @property
    def counts_tokens(self) -> bool:
        return any(s.kind in TOKEN_KINDS for s in self.subjects)

    async def add_tokens(self, tokens: int) -> None:
        counted = [s for s in self.subjects if s.kind in TOKEN_KINDS]
        if not counted or tokens <= 0:
            return
        try:
            await self.quotas.counters.add_tokens(counted, tokens, now_ms())
        except (CountersUnavailable, OSError) as error:
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
        except (CountersUnavailable, OSError) as error:
            log.warning("quota counters unreachable (%s); admitting the run unchecked", error)
            return ticket
        if over is not None:
            ticket.released = True
            raise refusal(subjects[over[0]], over[1], now)
        return ticket
