"""The start gate: how many run starts one process works on at once, and which it refuses.

Starting a run is a burst of work on the event loop that every stream of the process shares:
parsing and checking the request, the thread's lock and the run's rows in one transaction, the
run's task. When hundreds of starts arrive together (a deploy's reconnect storm, a launch, a
benchmark) and all are let in, every turn of the loop is full of start work and every token of
every run already streaming waits behind it. Through the gate they go a few at a time, in the
order they came: a start waits for its turn instead of everyone waiting for all of them
(docs/decisions/0026-start-gate.md).

Past what the process can carry, waiting in turn only makes everyone wait: every start is
admitted, and the last get their first token long after. So the gate also refuses, at once and
before any work, with 503 `OVERLOADED` and `Retry-After` (a balancer sends the user elsewhere;
not 429, which is the user's own quota), while

- the process already has `max_active` runs going or starting (`GATEWAY_MAX_ACTIVE_RUNS`, an
  operator's cap: none by default), or
- a start under way (waiting for its turn, or being started) has taken `max_wait` seconds
  (`GATEWAY_MAX_START_WAIT_SECONDS`: a part of the first-token bound, the rest left for the
  model's answer): the process starts runs more slowly than they come (its loop is full, or
  the queue is long), and a newcomer would only wait longer for its first token. The starts
  already under way go on; so no admitted start takes much longer than that. Also while a
  newcomer would take that long to be started at the pace of the queue (`queue_wait`: the
  starts under way and its own, each costing the loop's CPU that the queue's starts cost,
  `start_pace.py`), which cuts a queue growing faster than it drains before its oldest start
  has waited that long. A burst arriving in one instant is let in whole (no start of it has
  ended yet to tell its pace; one from an earlier queue measured other work);
- the event loop has run `max_lag` seconds late at each of its last few ticks
  (`GATEWAY_MAX_LOOP_LAG_SECONDS`, `lateness.py`): the process's core is full (its streams, or
  other jobs on the machine), every token already waits, and a new run would add to it (one
  pause of the loop is not a reason);
- the event loop's thread has used `max_cpu` of one core over the last second
  (`GATEWAY_MAX_LOOP_CPU`, `lateness.py`): the process is busy with its own work and a new run's
  tokens would soon make every stream wait (the lateness would say so only once they do).

What the process can carry is what these measure, not a count: the runs one core carries
differ tenfold between runs that stream 50 tokens a second and runs that wait on a tool, and
between one provider's stream and another's. A count (`max_active`,
`GATEWAY_MAX_ACTIVE_RUNS`) is the operator's cap when wanted (off by default).

Runs already admitted keep their pace. Each refusal is counted by the limit that refused it and
logged, at most once a second, with the figures (`refused`). `saturation()` says why the
process refuses, for `/ready` (a balancer stops sending it work until it clears) and for the
door that refuses a run start before any work (`api/door.py`): it is asked for every
run-start request, so it stays a few comparisons.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from ...observability import metrics
from ...protocol.problems import ApiError, Problem
from .start_pace import StartPace

log = logging.getLogger(__name__)
# What a refused client is told to wait: a balancer retries elsewhere at once; one process's
# queue drains within about a second.
RETRY_AFTER_SECONDS = 1


# Refusals are logged at most this often (seconds), with how many there were since.
LOG_EVERY = 1.0

# What a refused caller reads: no figure of the process (the caller may not be authenticated).
REFUSED = ("This gateway process is at capacity and starts no new run now; retry after "
           "Retry-After seconds (another process may take it)")


@dataclass(frozen=True)
class Saturation:
    """Why new runs are refused: the limit's setting, and the figures (for `/ready`, logs)."""

    setting: str
    detail: str


class Overloaded(ApiError):
    """The 503 a new run gets while the process is saturated; `headers` go on the response."""

    def __init__(self, saturation: Saturation) -> None:
        super().__init__(Problem.OVERLOADED, REFUSED, reason=saturation.setting)
        self.headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}


class StartGate:
    """At most `width` run starts at once; the rest wait in arrival order (asyncio's
    semaphore wakes waiters first come, first served). `active` counts the runs going, `lag`
    is the loop's recent lateness, `share` the share of a core its thread used; `max_active`,
    `max_wait`, `max_lag` and `max_share` (0: no limit) are when a new start is refused
    instead."""

    def __init__(self, width: int, max_active: int = 0, max_wait: float = 0.0,
                 active: Callable[[], int] = lambda: 0,
                 clock: Callable[[], float] = time.monotonic, max_lag: float = 0.0,
                 lag: Callable[[], float] = lambda: 0.0,
                 cpu: Callable[[], float] = time.thread_time, max_share: float = 0.0,
                 share: Callable[[], float] = lambda: 0.0) -> None:
        self._slots, self.width = asyncio.Semaphore(width), width
        self.max_active, self.max_wait, self._active = max_active, max_wait, active
        self.pace = StartPace(cpu)  # the loop's CPU per start while starts queue
        # Starts under way (waiting or inside; not yet counted by `active`), oldest first.
        self._arrivals: dict[object, float] = {}
        self._inside = 0
        self._clock = clock
        self.max_lag, self._lag = max_lag, lag
        self.max_share, self._share = max_share, share
        self._logged_at, self._unlogged = -LOG_EVERY, 0  # refusals' log line (`refused`)

    def saturation(self) -> Saturation | None:
        """Why a new start would be refused now (None: it would be let in). Cheap enough to
        ask for every request at the door (`api/door.py`)."""
        if self.max_active and self._active() + len(self._arrivals) >= self.max_active:
            return Saturation("GATEWAY_MAX_ACTIVE_RUNS",
                              f"{self.max_active} runs going or starting")
        if self.max_wait and self._arrivals:
            waited = self._clock() - next(iter(self._arrivals.values()))
            if waited >= self.max_wait:
                return Saturation("GATEWAY_MAX_START_WAIT_SECONDS",
                                  f"a run start has taken {waited:.2f} s so far")
            if (wait := self.queue_wait()) >= self.max_wait:
                return Saturation("GATEWAY_MAX_START_WAIT_SECONDS",
                                  f"a new start would take about {wait:.2f} s to start "
                                  f"({len(self._arrivals)} under way, "
                                  f"{self.pace.seconds() * 1000:.1f} ms of the loop each)")
        if self.max_lag and (lag := self._lag()) >= self.max_lag:
            return Saturation("GATEWAY_MAX_LOOP_LAG_SECONDS",
                              f"the event loop runs {lag * 1000:.0f} ms late")
        if self.max_share and (share := self._share()) >= self.max_share:
            return Saturation("GATEWAY_MAX_LOOP_CPU",
                              f"the event loop used {share:.0%} of a core over the last second")
        return None

    def refused(self, saturation: Saturation) -> Overloaded:
        """The refusal of a new run for `saturation`: counted in `/metrics` (by code, and by
        the limit that refused it) and logged with the figures, at most once every
        `LOG_EVERY` seconds with the number refused since."""
        metrics.REFUSALS.labels(Problem.OVERLOADED.name).inc()
        metrics.OVERLOADED.labels(saturation.setting).inc()
        self._unlogged += 1
        now = self._clock()
        if now - self._logged_at >= LOG_EVERY:
            log.warning("refusing new runs (503 OVERLOADED): %s (%s); %d refused, for any "
                        "limit, since the last such line", saturation.detail, saturation.setting,
                        self._unlogged)
            self._logged_at, self._unlogged = now, 0
        return Overloaded(saturation)

    def queue_wait(self) -> float:
        """Seconds a new start would take to start at the queue's pace: the starts under way
        and its own, each taking the loop's CPU that the queue's starts took (`start_pace.py`;
        0 while no queue's pace is known: a burst arriving in one instant is let in whole)."""
        return (len(self._arrivals) + 1) * self.pace.seconds()

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """A start's turn: refused at once (`Overloaded`) while the process is saturated, else
        held from the start's arrival (waiting in order) to its end."""
        held = await self._arrive()
        current = _TURN.set(held)
        try:
            yield
        finally:
            _TURN.reset(current)
            self._leave(held)

    @contextlib.asynccontextmanager
    async def outside(self) -> AsyncIterator[None]:
        """Slow work of a start that must not hold the others up (reading the MCP resources a
        message embeds): the start's turn ends for it, and the start takes a new one after it,
        refused as a new start would be. Outside any turn (a start from a background task), it
        only runs the work."""
        held = _TURN.get(None)
        if held is None or held.gate is not self or not held.inside:
            yield
            return
        self._leave(held)
        yield
        again = await self._arrive()
        held.token, held.inside = again.token, True

    async def _arrive(self) -> _Held:
        saturation = self.saturation()
        if saturation is not None:
            raise self.refused(saturation)
        token = object()
        self._arrivals[token] = self._clock()
        try:
            if self._slots.locked():
                metrics.STARTS_WAITING.inc()
                try:
                    await self._slots.acquire()
                finally:
                    metrics.STARTS_WAITING.dec()
            else:
                await self._slots.acquire()
        except BaseException:
            del self._arrivals[token]
            raise
        self._inside += 1
        return _Held(self, token)

    def _leave(self, held: _Held) -> None:
        if not held.inside:
            return
        held.inside = False
        self._inside -= 1
        self._slots.release()
        self.pace.ended(queued=len(self._arrivals) - 1 - self._inside)
        del self._arrivals[held.token]


@dataclass
class _Held:
    """A turn taken by the current task (`_TURN`): its gate, and its place among the arrivals
    while it is inside."""

    gate: StartGate
    token: object
    inside: bool = True


# The turn the current task holds: `outside` leaves it and takes it again.
_TURN: contextvars.ContextVar[_Held] = contextvars.ContextVar("start_turn")
