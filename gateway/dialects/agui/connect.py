"""`POST /v1/agui/agents/{agent}/connect`: an AG-UI client (re)loads a thread.

What `connectAgent()` of `@ag-ui/client` and CopilotKit's runtime `connect` expect: one SSE
stream that gives the client the thread as it is, then follows its active run. Its `threadId`
names the thread (as for a run); its `runId` names the snapshot.

1. `RUN_STARTED` (the input's `runId`), `MESSAGES_SNAPSHOT` (the thread's messages in AG-UI
   shape: `snapshot.py`), `STATE_SNAPSHOT` (its components, and the tool calls it waits for),
   `RUN_FINISHED` (for a 1.0 client, `outcome.pendingToolCallIds` when the thread waits for
   client tool results). These events carry no SSE id.
2. If a run is active, its own events from its start (the same events, with the same ids, as
   `GET /v1/agui/threads/{threadId}/runs/{runId}`), live until it ends. Its output is not in the
   snapshot, so nothing arrives twice; its input (the user's message) is.

With a cursor (`Last-Event-ID` or `?after=N`), the client already holds the snapshot: the
stream is the thread's latest run (active, or the one that just ended) after event N.

A thread that does not exist, or that the caller may not see, is an empty thread (no 404): the
answer never tells whether a thread id is taken.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
)
from starlette.requests import Request
from starlette.responses import Response

from ...api.agent_choice import agent_for
from ...api.context import json_body, may_see, project_of, services, user_scope
from ...api.runs import event_cursor, run_events, sse_response
from ...protocol.clock import now_ms
from ...store.tables import ThreadRow
from . import input as agui_input
from . import snapshot
from . import translate as agui
from .routes import client_ids, protocol_version


async def connect(request: Request) -> Response:
    asked = request.path_params["agent"]
    agent_for(request, None, asked)  # an unknown agent is a 404 before the body is read
    body: RunAgentInput = await json_body(request, agui_input.GatewayRunInput)
    store = services(request).store
    scope = user_scope(request, agui_input.forwarded(body, "userKey"))
    thread = await store.get_thread_by_client_id(project_of(request), body.thread_id)
    if thread is not None and not may_see(request, thread, scope):
        thread = None
    if thread is not None:
        agent_for(request, thread, asked)  # another agent's thread: 409, as for a run
    cursor = event_cursor(request)
    if cursor:
        return sse_response(request, _latest_run(request, thread, cursor), _headers(thread))
    return sse_response(request, _thread(request, body, thread), _headers(thread))


def _headers(thread: ThreadRow | None) -> dict[str, str]:
    return {"X-Thread-Id": thread.id} if thread is not None else {}


def _active(thread: ThreadRow) -> str | None:
    return thread.current_run_id if thread.run_status != "idle" else None


async def _thread(request: Request, body: RunAgentInput, thread: ThreadRow | None
                  ) -> AsyncIterator[dict[str, str]]:
    for event in await _snapshots(request, body, thread):
        yield {"data": agui.encode(event)}
    active = _active(thread) if thread is not None else None
    if thread is not None and active is not None:
        async for message in _run_after(request, thread, active, 0):
            yield message


async def _snapshots(request: Request, body: RunAgentInput, thread: ThreadRow | None
                     ) -> list[BaseEvent]:
    """The thread as it is, framed as a run of its own (the AG-UI verifier wants every event
    inside one); its output of the active run left to that run's own events."""
    thread_id, run_id, now = body.thread_id, body.run_id, now_ms()
    messages, state, pending = [], {}, None
    if thread is not None:
        store = services(request).store
        rows = await store.history(thread.id)
        active = _active(thread)
        components = snapshot.rendered(rows, active)
        current = {c.id: c.state for c in (await store.components_of(thread.id)).values()
                   if c.state is not None}
        messages = snapshot.with_component_answers(snapshot.messages(rows, active), components)
        waiting = thread.pending_tool_calls if active is None else None
        state = snapshot.state(components, current, waiting)
        if waiting and body.protocol_version is not None:  # 1.0: the outcome names them
            pending = [p["toolCallId"] for p in waiting]
    outcome = (None if body.protocol_version is None
               else RunFinishedSuccessOutcome(pending_tool_call_ids=pending))
    events: list[BaseEvent] = [
        RunStartedEvent(thread_id=thread_id, run_id=run_id, protocol_version=PROTOCOL_VERSION),
        MessagesSnapshotEvent(messages=messages), StateSnapshotEvent(snapshot=state),
        RunFinishedEvent(thread_id=thread_id, run_id=run_id, outcome=outcome)]
    for event in events:
        event.timestamp = now
    return events


async def _latest_run(request: Request, thread: ThreadRow | None, cursor: int
                      ) -> AsyncIterator[dict[str, str]]:
    run_id = thread and (_active(thread) or thread.last_completed_run_id)
    if thread is not None and run_id:
        async for message in _run_after(request, thread, run_id, cursor):
            yield message


async def _run_after(request: Request, thread: ThreadRow, run_id: str, after: int
                     ) -> AsyncIterator[dict[str, str]]:
    run = await services(request).store.get_run(run_id)
    if run is None:
        return
    dialect = functools.partial(agui.AguiDialect, protocol_version(run), client_ids(thread, run))
    async for message in run_events(request, run.id, after, dialect, agui.encode):
        yield message
