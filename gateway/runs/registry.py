"""The runs this process executes, and the logs of those that just ended here."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from ..engine.agents import DEFAULT_AGENT
from ..engine.loop import ServerToolSpec
from ..engine.usage import RunUsage
from ..protocol.run_spec import RunSpec
from ..store.tables import MessageRow, RunRow
from .log import LiveLog
from .phase import RunPhase
from .quotas import Ticket
from .recorder import RunRecorder

# How long a finished run's log stays in memory for late subscribers (it is on disk anyway).
LINGER_SECONDS = 5.0


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
    # Its spec as its row keeps it (`RunSpec.from_snapshot`), read once when it is launched.
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
        self._lingering: dict[str, LiveLog] = {}

    def add(self, active: ActiveRun) -> None:
        self.active[active.run_id] = active

    def retire(self, active: ActiveRun) -> None:
        """Forget a run that ended; its live log lingers a little for late subscribers."""
        self.active.pop(active.run_id, None)
        self._lingering[active.run_id] = active.live
        asyncio.get_running_loop().call_later(
            LINGER_SECONDS, self._lingering.pop, active.run_id, None)

    def live_log(self, run_id: str) -> LiveLog | None:
        active = self.active.get(run_id)
        return active.live if active is not None else self._lingering.get(run_id)

    def for_thread(self, thread_id: str) -> ActiveRun | None:
        """The run this process is executing on the thread, if any.

        A run that is already ending is skipped: for a moment it can overlap the thread's next
        run, and a state delta published to it would be dropped with its closing log.
        """
        for active in self.active.values():
            if active.row.thread_id == thread_id and not active.ending:
                return active
        return None
