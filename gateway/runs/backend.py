"""What the run lifecycle needs from a backend: how this process reaches the others.

A run's live log, its cancel and the thread events of its components (state updates) must reach
every process that serves the run's readers, and quotas must count every process's runs. Each
technology (`gateway/backends/`: memory and database polling on one machine, PostgreSQL
LISTEN/NOTIFY, Redis streams and pub/sub) implements the three protocols here and hands them to
the lifecycle as one `Backend`; nothing in `runs/` knows which one it got.

Signals: the database flag is the durable cancel signal (always written, polled by the owner),
and a backend may add a channel in front of it that delivers within milliseconds. Thread events
have no durable form (the state itself is in the database): they travel on that channel, and
without one they reach only the runs of the process they were made on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypedDict, final

from ..observability import outages
from ..protocol.frames_schema import JsonPatchOp
from ..protocol.problems import Problem
from .admission.quotas import Counters, LocalCounters
from .log.live import Entry, LiveLog

log = logging.getLogger(__name__)

OnCancel = Callable[[str], None]


@final
class ComponentStateChange(TypedDict):
    """A component's state changed on a thread whose run streams in another process
    (`ComponentStates.deliver` publishes it there): the change from revision `base`."""

    kind: Literal["component_state"]
    componentId: str
    base: int
    old: dict[str, Any]
    new: dict[str, Any]
    ops: list[JsonPatchOp]


@final
class ComponentStateReload(TypedDict):
    """The same change as a reference only, when it is too large for the channel: the
    receiver reads the state back from the database."""

    kind: Literal["component_state"]
    componentId: str
    reload: Literal[True]


ThreadEvent = ComponentStateChange | ComponentStateReload
"""What one process tells the others about a thread (JSON on the backend's channel)."""
OnThreadEvent = Callable[[str, ThreadEvent], Awaitable[None]]
PING_SECONDS = 2.0  # what `/ready` waits for each part to answer


class RunFeed(Protocol):
    """A run's log read from another process: entries (`seq`, `ts`, frame) in order, without
    gaps or duplicates, knowing nothing of dialects (translating them is the endpoint's job).
    A feed whose `publish` has nothing to do (the database's: the recorder's writes are the
    feed) says so with a class attribute `publishes = False`, and runs get no publishing task."""

    def subscribe(self, run_id: str, after: int = 0) -> AsyncGenerator[Entry, None]:
        """The run's entries with `seq > after`, then live ones until its terminal frame."""
        ...

    async def publish(self, live: LiveLog, stopped: Callable[[], bool]) -> None:
        """Make the live log of a run of this process readable by `subscribe` in the others,
        until the log closes (or `stopped()`)."""
        ...

    async def salvage(self, run_id: str, after: int, limit: int) -> list[Entry]:
        """What other processes could read of the live tail of a run whose process died:
        its entries with `seq > after` (at most `limit`), which it may have shown without
        writing them; none if the feed keeps nothing beyond the database."""
        ...


class OwnedRuns(Protocol):
    """The runs this process executes (`RunRegistry`), as the backends' listeners see them."""

    def ids(self) -> Collection[str]:
        """Their ids, now."""
        ...

    async def running(self) -> None:
        """Returns once there is one (at once if there is): a poll for their cancel flags
        sleeps here while there is none, instead of waking an idle process to find none."""
        ...

    async def idle(self) -> None:
        """Returns once none goes (at once if none does): a poll whose runs all ended before
        it was due has nothing to look at, and its timer need not wake the loop."""
        ...


class Signals(Protocol):
    async def request_cancel(self, run_id: str) -> None:
        """Ask whichever process runs `run_id` to cancel it."""
        ...

    async def publish_thread_event(self, thread_id: str, event: ThreadEvent) -> None:
        """Tell the other processes about `event` on the thread (JSON-serialisable)."""
        ...

    async def listen(self, owned: OwnedRuns, on_cancel: OnCancel,
                     on_thread_event: OnThreadEvent) -> None:
        """Call `on_cancel(run_id)` for each cancel requested for one of the `owned` runs,
        and `on_thread_event` for each event another process published; until cancelled."""
        ...


@dataclass(frozen=True)
class Probe:
    """A part the backend depends on, as `/ready` reports it when it does not answer."""

    name: str  # its key in `/ready`'s checks: "database", "redis"
    problem: Problem  # what `/ready` answers: Problem.DATABASE_UNAVAILABLE
    detail: str  # "The database cannot be reached"
    ping: Callable[[], Awaitable[object]]


class Unreachable(Exception):
    def __init__(self, probe: Probe) -> None:
        super().__init__(probe.detail)
        self.probe = probe


async def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Backend:
    """One technology's run feed, signals and quota counters, its parts for `/ready`, and how
    it closes (`gateway.backends.open_backend` picks it from the settings)."""

    name: str
    feed: RunFeed
    signals: Signals
    counters: Counters
    probes: tuple[Probe, ...] = ()
    close: Callable[[], Awaitable[None]] = field(default=_nothing)
    # This process's own counters, for when shared `counters` cannot be reached (None: the
    # counters are this process's already).
    local_counters: LocalCounters | None = None

    async def ping(self) -> list[str]:
        """The names of the parts that answered, each within `PING_SECONDS`; `Unreachable`
        for the first that did not."""
        for probe in self.probes:
            try:
                async with asyncio.timeout(PING_SECONDS):
                    await probe.ping()
            except Exception as exc:  # any driver error or the timeout: the answer is the same
                # Logged once per outage (`outages`), not once per `/ready`.
                outages.down(probe.name, str(exc).splitlines()[0] if str(exc)
                             else type(exc).__name__)
                raise Unreachable(probe) from None
            outages.up(probe.name)
        return [probe.name for probe in self.probes]
