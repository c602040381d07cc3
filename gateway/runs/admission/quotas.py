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

A thread's creation and a fork count as starts too (`charge`: runs per minute only, no slot),
a fork one more for each `FORK_START_BYTES` it copies: storage is metered as model calls are.

When the shared counters cannot be reached (Redis is down), `GATEWAY_QUOTA_OUTAGE` says what a
start gets (`Outage`): `local` (the default) checks it against this process's own counters,
which mirror the starts and tokens it admitted while Redis answered, each limit divided among
the processes Redis last saw admitting (`Counters.processes`): a key's limit holds, roughly,
across the outage, and no outage lets every run through. `refuse` answers 503 (exact, and no
run starts meanwhile); `admit` lets every start through unchecked, as before (off by default:
it lifts every quota while Redis is away). Starts admitted without the shared counters are
counted in `gateway_quota_outage_admissions`, and the tokens their runs use that Redis could
not take are kept and added to it once it answers again.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ...auth.subjects import Limits, Subject
from ...observability import metrics, outages
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
Outage = Literal["local", "refuse", "admit"]
# A fork counts one start more for each this many bytes of messages and state it copies.
FORK_START_BYTES = 64 * 1024


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
    """Shared counters that cannot be reached: a start is decided as `GATEWAY_QUOTA_OUTAGE`
    says, a slot expires by itself (the backend raises it for its own connection errors)."""


class QuotaExceeded(ApiError):
    """A 429; `headers` go on the response (`Retry-After`)."""

    def __init__(self, kind: Problem, detail: str, retry_after: int, **extra: Any) -> None:
        super().__init__(kind, detail, **extra)
        self.headers = {"Retry-After": str(retry_after)}


class Counters(Protocol):
    """A backend's quota counters (`runs.backend`): one process's, or every process's."""

    # How many processes share these counters (as last seen): each one's share of a limit
    # while they cannot be reached.
    processes: int

    async def acquire(self, ticket: str, subjects: Sequence[Subject], now: int,
                      weight: int = 1) -> tuple[int, Exceeded] | None:
        """Take a slot and `weight` starts for every subject, or none and say which is over
        (a subject with room for one more start takes the whole weight)."""
        ...

    async def release(self, ticket: str, subjects: Sequence[Subject]) -> None: ...

    async def add_tokens(self, subjects: Sequence[Subject], tokens: int, now: int) -> None: ...


class LocalCounters(Counters, Protocol):
    """This process's own counters, which also keep a record of what the shared ones admit."""

    def count_starts(self, subjects: Sequence[Subject], now: int, weight: int) -> None:
        """Add starts without checking a limit (what the shared counters admitted)."""
        ...


@dataclass
class Ticket:
    """A run's admission under its subjects' quotas: release it once when the run ends.
    `shared`: its slots are in the shared counters (else in this process's, taken during an
    outage, or nowhere)."""

    quotas: "Quotas"
    subjects: Sequence[Subject]
    id: str = field(default_factory=lambda: new_id("q_"))
    released: bool = False
    shared: bool = True

    async def release(self) -> None:
        if self.released or not self.subjects:
            return
        self.released = True
        if not self.shared:
            if self.quotas.local is not None:
                await self.quotas.local.release(self.id, self.subjects)
            return
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
        await self.quotas.add_tokens(counted, tokens)


NO_QUOTA: tuple[Subject, ...] = ()


class Quotas:
    def __init__(self, counters: Counters, local: LocalCounters | None = None,
                 outage: Outage = "local") -> None:
        """`local`: this process's counters, for when `counters` (shared) cannot be reached;
        None when `counters` are this process's already (nothing to be away)."""
        self.counters, self.local, self.outage = counters, local, outage
        # Tokens the shared counters could not take, by subject and UTC day.
        self.owed: dict[tuple[str, int], tuple[Subject, int]] = {}

    async def acquire(self, subjects: Sequence[Subject], weight: int = 1) -> Ticket:
        """A ticket for a new run, or the 429 `ApiError` of the first limit it is over.

        If the shared counters cannot be reached, `outage` decides (the module's docstring)."""
        subjects = [s for s in subjects if s.limits.any]
        ticket = Ticket(self, subjects)
        if not subjects:
            return ticket
        now = now_ms()
        try:
            over = await self.counters.acquire(ticket.id, subjects, now, weight)
        except (CountersUnavailable, OSError) as error:
            return await self._without_shared(ticket, now, weight, error)
        if over is not None:
            ticket.released = True
            raise refusal(subjects[over[0]], over[1], now)
        if self.local is not None:
            self.local.count_starts(subjects, now, weight)
        if self.owed:
            await self._pay_owed(now)
        return ticket

    async def charge(self, subjects: Sequence[Subject], starts: int = 1) -> None:
        """Count a thread's creation (or a fork, `starts` for its size) as starts against each
        subject's runs per minute: 429 `RATE_LIMITED` once a subject has no room left. It takes
        no concurrency slot and is not refused for a spent token budget (it calls no model)."""
        rated = [Subject(s.kind, s.name, Limits(runs_per_minute=s.limits.runs_per_minute))
                 for s in subjects if s.limits.runs_per_minute]
        ticket = await self.acquire(rated, max(1, starts))
        ticket.released = True  # no slot to give back

    async def add_tokens(self, subjects: Sequence[Subject], tokens: int) -> None:
        """Tokens used by runs of `subjects`: to the shared counters, or owed to them until
        they answer again; and to this process's own (what an outage checks against)."""
        now = now_ms()
        if self.local is not None:
            await self.local.add_tokens(subjects, tokens, now)
        try:
            await self.counters.add_tokens(subjects, tokens, now)
        except (CountersUnavailable, OSError) as error:
            unreachable(error, f"{tokens} tokens kept for later")
            self._owe(subjects, tokens, now)

    def _owe(self, subjects: Sequence[Subject], tokens: int, now: int) -> None:
        day = now // DAY_MS
        for subject in subjects:
            owed = self.owed.get((subject.name, day))
            self.owed[(subject.name, day)] = (subject, tokens + (owed[1] if owed else 0))

    async def _pay_owed(self, now: int) -> None:
        """The tokens owed to the shared counters, added now that they answer (those of a day
        that is over are dropped: its budget no longer counts)."""
        owed, self.owed = self.owed, {}
        for (_, day), (subject, tokens) in owed.items():
            if day != now // DAY_MS:
                continue
            try:
                await self.counters.add_tokens([subject], tokens, now)
            except (CountersUnavailable, OSError):
                self._owe([subject], tokens, now)

    async def _without_shared(self, ticket: Ticket, now: int, weight: int,
                              error: BaseException) -> Ticket:
        """A start while the shared counters cannot be reached, as `outage` says."""
        if self.outage == "refuse" or (self.outage == "local" and self.local is None):
            unreachable(error, "start refused")
            ticket.released = True
            raise ApiError(Problem.QUOTAS_UNAVAILABLE, "The gateway cannot check this key's "
                           "quotas right now; retry shortly", isRetryable=True)
        ticket.shared = False
        if self.outage == "admit" or self.local is None:
            unreachable(error, "admitting the run unchecked")
            metrics.QUOTA_OUTAGE_ADMISSIONS.labels("admit").inc()
            ticket.released = True
            return ticket
        unreachable(error, "checked against this process's share")
        processes = max(1, self.counters.processes)
        shares = [Subject(s.kind, s.name, share(s.limits, processes)) for s in ticket.subjects]
        over = await self.local.acquire(ticket.id, shares, now, weight)
        if over is not None:  # the refusal names the subject's own limit, as it knows it
            ticket.released = True
            raise refusal(ticket.subjects[over[0]], over[1], now)
        metrics.QUOTA_OUTAGE_ADMISSIONS.labels("local").inc()
        return ticket


def share(limits: Limits, processes: int) -> Limits:
    """One process's part of `limits` among `processes` (at least 1 of each limit set)."""

    def part(limit: int) -> int:
        return limit and max(1, math.ceil(limit / processes))

    return Limits(part(limits.concurrent_runs), part(limits.runs_per_minute),
                  part(limits.daily_tokens))


def unreachable(error: BaseException, outcome: str) -> None:
    """The shared counters did not answer: the outage is said once (`observability/outages`:
    the log line, since when, `/ready`), each start's outcome only at debug level (a line per
    start would flood the log for as long as the outage lasts)."""
    outages.down("redis", f"quota counters: {type(error).__name__}")
    log.debug("quota counters unreachable (%s): %s", error, outcome)
