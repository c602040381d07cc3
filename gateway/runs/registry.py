"""The runs this process executes, and the logs of those that just ended here."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass, field

from ..engine.agents.agent import DEFAULT_AGENT
from ..engine.loop import ServerToolSpec
from ..engine.usage import RunUsage
from ..protocol.run_spec import RunSpec
from ..store.tables import MessageRow, RunRow
from .admission.quotas import Ticket
from .log.live import LiveLog
from .log.recorder import RunRecorder
from .phase import RunPhase

# How long a finished run's log stays in memory for late subscribers (it is on disk anyway),
# at least; the logs of the runs that ended within `LINGER_SLACK_SECONDS` of each other are
# let go together, by one timer (a timer per run was a wake-up per run, 5 s after its end).
LINGER_SECONDS = 5.0
LINGER_SLACK_SECONDS = 1.0


@dataclass
class ActiveRun:
    row: RunRow
    live: LiveLog
    phase: RunPhase = RunPhase.STARTING
    cancel_requested: bool = False  # why it is ending: a DELETE or the disconnect policy
    task: asyncio.Task[None] | None = None
    recorder: RunRecorder | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    ticket: Ticket | None = None  # its quota slots, released when it ends
    # The thread's history as the start wrote it (a new thread), so the run need not read it.
    history: list[MessageRow] | None = None
    # What its model calls consumed so far (`runs/usage.py`), recorded with its end.
    usage: RunUsage = field(default_factory=RunUsage)
    agent: str = DEFAULT_AGENT  # the agent it runs, for usage and metrics
    # Server tools this run alone may call, besides its agent's (a Chorus message's MCP
    # servers), by name.
    extra_tools: dict[str, ServerToolSpec] = field(default_factory=dict)
    # The thread's queued runs as its end's transaction found them (`finish_run`): empty,
    # nothing to promote after it; None, not looked up (it ended another way).
    queued_after: list[str] | None = None
    # The spec it was admitted with (a queued run: its row's, `RunSpec.from_row`).
    spec: RunSpec = field(default_factory=RunSpec)

    @property
    def run_id(self) -> str:
        return self.row.id

    @property
    def ending(self) -> bool:
        return not self.phase.live


class RunRegistry:
    def __init__(self) -> None:
        self.active: dict[str, ActiveRun] = {}
        # Logs of runs that ended, oldest first, with when each may go (loop time).
        self._lingering: dict[str, tuple[LiveLog, float]] = {}
        self._sweep: asyncio.TimerHandle | None = None
        self._running = asyncio.Event()  # set while `active` holds a run
        self._idle = asyncio.Event()  # set while it holds none
        self._idle.set()

    def add(self, active: ActiveRun) -> None:
        self.active[active.run_id] = active
        self._running.set()
        self._idle.clear()

    def ids(self) -> Collection[str]:
        """The runs going here (the backends' `OwnedRuns`, whose cancel flags they read)."""
        return self.active.keys()

    async def running(self) -> None:
        """Returns once a run goes here: the backends' poll of cancel flags sleeps until then."""
        await self._running.wait()

    async def idle(self) -> None:
        """Returns once no run goes here: a cancel poll due after its runs ended is dropped."""
        await self._idle.wait()

    def retire(self, active: ActiveRun) -> None:
        """Forget a run that ended; its live log lingers a little for late subscribers."""
        self.active.pop(active.run_id, None)
        if not self.active:
            self._running.clear()
            self._idle.set()
        loop = asyncio.get_running_loop()
        self._lingering.pop(active.run_id, None)  # kept in order of ending
        self._lingering[active.run_id] = (active.live, loop.time() + LINGER_SECONDS)
        if self._sweep is None:
            self._sweep = loop.call_later(LINGER_SECONDS + LINGER_SLACK_SECONDS, self._let_go)

    def _let_go(self) -> None:
        """Drop the logs whose time is up; the timer again for the oldest left, if any."""
        loop = asyncio.get_running_loop()
        now, self._sweep = loop.time(), None
        while self._lingering:
            run_id, (_, until) = next(iter(self._lingering.items()))
            if until > now:
                self._sweep = loop.call_at(until + LINGER_SLACK_SECONDS, self._let_go)
                return
            del self._lingering[run_id]

    def live_log(self, run_id: str) -> LiveLog | None:
        active = self.active.get(run_id)
        if active is not None:
            return active.live
        lingering = self._lingering.get(run_id)
        return lingering[0] if lingering is not None else None

    def for_thread(self, thread_id: str) -> ActiveRun | None:
        """The run this process is executing on the thread, if any.

        A run that is already ending is skipped: for a moment it can overlap the thread's next
        run, and a state delta published to it would be dropped with its closing log.
        """
        for active in self.active.values():
            if active.row.thread_id == thread_id and not active.ending:
                return active
        return None
