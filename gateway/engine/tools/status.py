"""A server tool's progress, as Timbal's multi-agent `status` message.

A long tool (a search, a build, a report) can say what it is doing while the model waits:
`await ctx.status("Searching 3 sources")` in a Python tool (`ToolContext.status`), or, from an
MCP server, `notifications/progress` for the call (the gateway sends a progress token with
every call it makes while a run watches). Each becomes a set frame of one `status` message per
tool call (`{"type": "status", "state", "detail", "toolCallId", "sender"}`): a newer status of
the same call replaces the older (same `i`), and the message is deleted (`{"i", "v": null}`)
when the call ends, as Timbal says of a status ("typically deleted when work completes").

A status belongs to the run's log only (it has no `messageId`, so the thread does not store
it): the Timbal views show it live and on replay; Chorus sends it to the callback
(`{"type": "status", "status": detail}`); the Tambo and AG-UI streams do not show it.

Bounded, because a tool is code the operator trusts but a loop in it could flood every reader
and the log: a detail is cut at `MAX_DETAIL_CHARS`, a state at `MAX_STATE_CHARS`; a run writes
at most `StatusBudget.max_per_run` of them, and no more than `PER_SECOND` a second after a
burst of `BURST` (the others are dropped: a status is a hint, the next one supersedes it).
"""

from __future__ import annotations

import logging
import math
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ...protocol import timbal
from ...protocol.clock import new_id, now_ms
from ...protocol.frames_schema import Authorship, StatusValue
from ...protocol.timbal import FrameSink

log = logging.getLogger(__name__)

MAX_DETAIL_CHARS = 500
MAX_STATE_CHARS = 64
PER_SECOND = 5.0
BURST = 10.0
DEFAULT_STATE = "working"


@dataclass
class StatusBudget:
    """How many statuses a run may still write: a total, and a rate (a token bucket)."""

    max_per_run: int = 100
    used: int = 0
    _tokens: float = BURST
    _at: float = field(default_factory=time.monotonic)
    _warned: bool = False

    def take(self) -> bool:
        """Whether one more status may be written now (and count it if so)."""
        now = time.monotonic()
        self._tokens = min(BURST, self._tokens + (now - self._at) * PER_SECOND)
        self._at = now
        if self.used >= self.max_per_run or self._tokens < 1.0:
            if not self._warned and self.used >= self.max_per_run:
                self._warned = True
                log.info("a run reached its %d tool statuses; later ones are dropped",
                         self.max_per_run)
            return False
        self._tokens -= 1.0
        self.used += 1
        return True


class ToolStatus:
    """The status line of one tool call: set as often as the budget allows, deleted at its end."""

    def __init__(self, sink: FrameSink, tool_call_id: str, who: Authorship,
                 budget: StatusBudget | None) -> None:
        self.sink, self.tool_call_id, self.who, self.budget = sink, tool_call_id, who, budget
        self.i: str | None = None  # the message's id, once a status was written
        self.ended = False  # a status that comes after the call's end is not shown

    async def report(self, detail: str, state: str = DEFAULT_STATE,
                     progress: float | None = None, total: float | None = None) -> bool:
        """Write the call's status now; False when it was dropped (over the run's budget)."""
        if self.ended or self.budget is None or not self.budget.take():
            return False
        value: StatusValue = {"type": "status", "state": _text(state, MAX_STATE_CHARS)
                              or DEFAULT_STATE, "detail": _text(detail, MAX_DETAIL_CHARS),
                              "toolCallId": self.tool_call_id}
        if progress is not None and math.isfinite(progress):
            value["progress"] = float(progress)
            if total is not None and math.isfinite(total):
                value["total"] = float(total)
        value.update(self.who)  # type: ignore[typeddict-item]  # sender, subagentRunId
        self.i = self.i or new_id()
        await self.sink.emit(timbal.set_value(self.i, value, now_ms()))
        return True

    async def clear(self) -> None:
        """The call ended: its status, if it had one, is deleted."""
        self.ended = True
        if self.i is not None:
            i, self.i = self.i, None
            await self.sink.emit(timbal.delete(i))


def _text(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else str(value)
    return text[:limit]


_current: ContextVar[ToolStatus | None] = ContextVar("tool_status", default=None)


def bind(status: ToolStatus | None) -> None:
    """Give the tool call running in this task (and what it awaits) its status line."""
    _current.set(status)


def current() -> ToolStatus | None:
    """The status line of the tool call running here, None outside one."""
    return _current.get()
