"""What a run stream is made of on the client side: events, the SSE framing, the cursor.

Shared by `Client` and `AsyncClient`: both read the same lines and keep the same state, and only
how they wait (blocking or awaiting) differs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

# A run's stream ends with one of these; anything else cut short is a dropped connection.
TERMINAL_TYPES = frozenset({"RUN_FINISHED", "RUN_ERROR"})
AWAITING_INPUT = "tambo.run.awaiting_input"


@dataclass(frozen=True)
class Event:
    """One AG-UI event of a run, as the gateway's Tambo dialect sends it.

    `type` is the AG-UI event type (`TEXT_MESSAGE_CONTENT`, `RUN_FINISHED`, ...); `id` is its
    position in the run's log, the cursor to come back with (`join(..., after=id)`); `None`
    only for an event that has no place in the log (a `RUN_ERROR` the server sends when it
    could not read the log: the client reconnects from the last `id` it had). `data` is the
    whole event as JSON.
    """

    type: str
    id: int | None
    data: dict[str, Any]

    @property
    def delta(self) -> str:
        """The text a `*_CONTENT` or `TOOL_CALL_ARGS` event adds ('' for other events)."""
        value = self.data.get("delta")
        return value if isinstance(value, str) else ""

    @property
    def name(self) -> str | None:
        """A `CUSTOM` event's name (`tambo.run.awaiting_input`, ...)."""
        value = self.data.get("name")
        return value if isinstance(value, str) else None

    @property
    def value(self) -> Any:
        """A `CUSTOM` event's value."""
        return self.data.get("value")


class GatewayError(Exception):
    """A request the gateway refused (problem+json: `status`, a stable `code`, `detail`), or a
    stream that could not be followed to its end."""

    def __init__(self, status: int, code: str, detail: str,
                 body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status, self.code, self.detail = status, code, detail
        self.body = body or {}

    @classmethod
    def from_response(cls, status: int, text: str) -> GatewayError:
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return cls(status, "HTTP_ERROR", text[:500])
        return cls(status, str(body.get("code", "HTTP_ERROR")),
                   str(body.get("detail") or body.get("title") or ""), body)


class SseParser:
    """Lines of an SSE response in, events out; comments (heartbeats) are skipped."""

    def __init__(self) -> None:
        self._id: int | None = None
        self._data: list[str] = []

    def feed(self, line: str) -> Iterator[Event]:
        if line == "":
            if self._data:
                data = json.loads("\n".join(self._data))
                yield Event(str(data.get("type", "")), self._id, data)
            self._id, self._data = None, []
        elif line.startswith("id:"):
            value = line[3:].strip()
            self._id = int(value) if value.isdigit() else None
        elif line.startswith("data:"):
            self._data.append(line[5:].removeprefix(" "))


@dataclass
class RunCursor:
    """Where a run stream is: its run and thread (known from the response headers, before any
    event), the last event id received, and whether the run's end has been seen. Events at or
    before the cursor are dropped, so a reconnection never repeats one."""

    thread_id: str | None = None
    run_id: str | None = None
    last_event_id: int | None = None
    ended: bool = False
    pending_tool_calls: list[dict[str, Any]] = field(default_factory=list)

    def note_headers(self, headers: Any) -> None:
        self.run_id = headers.get("x-run-id") or self.run_id
        self.thread_id = headers.get("x-thread-id") or self.thread_id

    def accept(self, event: Event) -> bool:
        """Whether to hand `event` on; a replayed one is not. A `RUN_ERROR` without an id is
        the server's failure to read the log, not the run's end: the stream is resumed."""
        if event.id is not None:
            if self.last_event_id is not None and event.id <= self.last_event_id:
                return False
            self.last_event_id = event.id
        elif event.type == "RUN_ERROR" and event.data.get("isRetryable"):
            return False
        if event.type == "RUN_STARTED":
            self.thread_id = event.data.get("threadId", self.thread_id)
            self.run_id = event.data.get("runId", self.run_id)
        if event.type == "CUSTOM" and event.name == AWAITING_INPUT:
            self.pending_tool_calls = list(event.value.get("pendingToolCalls", []))
        if event.type in TERMINAL_TYPES:
            self.ended = True
        return True

    def resume_target(self) -> tuple[str, str]:
        if not (self.thread_id and self.run_id):
            raise GatewayError(0, "STREAM_LOST", "the connection dropped before the gateway "
                                                 "named the run")
        return self.thread_id, self.run_id


class StreamView:
    """What a run stream (blocking or async) tells about its run while it is read."""

    cursor: RunCursor

    @property
    def thread_id(self) -> str | None:
        return self.cursor.thread_id

    @property
    def run_id(self) -> str | None:
        return self.cursor.run_id

    @property
    def last_event_id(self) -> int | None:
        """The id of the last event received: the cursor to `join` the run with later."""
        return self.cursor.last_event_id

    @property
    def pending_tool_calls(self) -> list[dict[str, Any]]:
        """The client tool calls the run paused for (`toolCallId`, `toolName`, `arguments`),
        once its `tambo.run.awaiting_input` event has been read; answer them with
        `submit_tool_results`."""
        return self.cursor.pending_tool_calls
