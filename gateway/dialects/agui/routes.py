"""AG-UI 1.0 endpoints: `HttpAgent` and CopilotKit run the gateway's agent here.

`POST /v1/agui/agents/{agent}/run` takes a `RunAgentInput` (parsed with `ag_ui.core`'s own
model) and answers with the run's AG-UI 1.0 events.

Ids. The client chooses its `threadId` and `runId`; they are names *within the caller's
project*, kept beside the gateway's own ids (`client_id` of the thread and run rows), never the
gateway's ids themselves. So two projects choosing the same ids get two threads that never
meet, and a project cannot learn that an id is taken elsewhere. Every event and every AG-UI
path names the client's ids; the response headers (`X-Thread-Id`, `X-Run-Id`) carry the
gateway's, which the Tambo and Timbal endpoints use for the same thread. A thread or run
without a client's name (made by the Tambo endpoints, or before names existed) answers to its
own id. A thread is created on first use of its `threadId`. A retried request with a `runId` the thread already ran replays
that run instead of starting another, unless its `resume` answers what the thread waits for now
(CopilotKit answers an interrupt under the interrupted run's `runId`): that starts the
continuation, as a run named by the gateway's id (`_continuation`). A `threadId` of the project
outside the caller's user scope is answered as if it did not exist (404).

The run is the same run the Tambo endpoints serve, so a stream can be resumed from its cursor
(`GET /v1/agui/threads/{threadId}/runs/{runId}` with `Last-Event-ID` or `?after=`), and a
run is cancelled with `DELETE` on the same path; its stream then ends with
`RUN_FINISHED {outcome: cancelled}`. `POST /v1/agui/agents/{agent}/connect` loads a thread
(see "connect" below).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    Message,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    ToolMessage,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...api.context import (
    admission,
    caller,
    json_body,
    may_see,
    project_of,
    services,
    user_scope,
)
from ...api.runs import cancelled, event_cursor, event_stream, gated, run_events, sse_response
from ...protocol.clock import now_ms
from ...protocol.problems import ApiError, Problem, echo
from ...protocol.run_spec import RunSpec
from ...protocol.tambo import wire
from ...runs.admission.threads import NewThread, OnThread, Target
from ...store.tables import RunRow, ThreadRow
from . import branches, routes_capabilities, routes_threads, snapshot
from . import input as agui_input
from . import translate as agui


def _started_by(run: RunRow) -> dict[str, Any] | None:
    """What the AG-UI client that started the run declared (None: a Tambo client began it)."""
    started_by = (RunSpec.from_row(run.request).metadata or {}).get("agui")
    return started_by if isinstance(started_by, dict) else None


def protocol_version(run: RunRow) -> str | None:
    """The AG-UI version the run's client declared when it started the run (a reconnect gets
    the same shape as the first response); 1.0 for a run a Tambo client began."""
    started_by = _started_by(run)
    return PROTOCOL_VERSION if started_by is None else started_by.get("protocolVersion")


def run_dialect(thread_name: str, run: RunRow) -> functools.partial[agui.AguiDialect]:
    """The translator of the run for the client that started it: its version, its opt-in to
    interrupts (`input.opts_into_interrupts`) and its ids (`thread_name`: the thread's, as the
    client calls it)."""
    started_by = _started_by(run) or {}
    return functools.partial(
        agui.AguiDialect, protocol_version(run), (thread_name, run.client_id or run.id),
        agui_input.opts_into_interrupts(started_by.get("forwardedProps")))


def client_ids(thread: ThreadRow, run: RunRow) -> tuple[str, str]:
    """The thread's and the run's ids as an AG-UI client knows them: the ids it chose, or the
    gateway's for a thread or run the Tambo endpoints began."""
    return thread.client_id or thread.id, run.client_id or run.id


def agui_stream(request: Request, thread_name: str, run: RunRow, after: int = 0,
                extra_headers: dict[str, str] | None = None) -> Response:
    """The run's events in AG-UI, shaped for its client's version, naming the client's ids."""
    return event_stream(request, run, after, extra_headers,
                        dialect=run_dialect(thread_name, run), encode=agui.encode)


@gated
async def run_agent(request: Request) -> Response:
    asked = request.path_params["agent"]
    door, who = admission(request), caller(request)
    door.agent(who, None, asked)  # an unknown agent is a 404 before the body is read
    body: RunAgentInput = await json_body(request, agui_input.GatewayRunInput)
    project = who.project
    user_key = user_scope(request, agui_input.forwarded(body, "userKey"))
    thread = await _scoped_thread(request, project, body.thread_id, user_key)
    existing = await services(request).store.get_run_by_client_id(project, body.run_id)
    continues = existing is not None and _continuation(body, thread, existing)
    if existing is not None and not continues:
        if thread is None or existing.thread_id != thread.id:
            raise ApiError(Problem.RUN_ID_IN_USE, f"Run id {body.run_id} is already used",
                           runId=body.run_id)
        door.agent(who, thread, asked)  # another agent's thread: 409, as for a run
        return agui_stream(request, client_ids(thread, existing)[0], existing,
                           extra_headers={"Idempotent-Replayed": "true"})
    target: Target
    if thread is None:
        target = NewThread(user_key, client_id=body.thread_id)
        spec = agui_input.run_spec(body, {}, None, asked)
    else:
        door.agent(who, thread, asked)  # another agent's thread: 409, before any branch
        thread = await _on_branch(request, thread, body)
        target = OnThread(thread)
        spec = agui_input.run_spec(body, agui_input.answers(thread.pending_tool_calls or []),
                                   thread.last_completed_run_id, asked)
    started = await door.submit(who, target, spec,
                                client_run_id=None if continues else body.run_id)
    # The thread is the client's `threadId`, whether it was there, made, or made meanwhile.
    return agui_stream(request, body.thread_id, started.run)


async def _on_branch(request: Request, thread: ThreadRow, body: RunAgentInput) -> ThreadRow:
    """The thread the run goes on: `thread`, or a branch of it when the input's history leaves
    the thread's (an edited or regenerated message, or `parentRunId` naming an earlier run:
    `branches.py`). A thread with a run going on is not branched (its multitask strategy
    decides)."""
    if thread.run_status != "idle" or _answers_the_pause(body, thread):
        return thread
    store = services(request).store
    parent = None
    if body.parent_run_id:
        run = await store.get_run_by_client_id(thread.project_id, body.parent_run_id)
        parent = run.id if run is not None and run.thread_id == thread.id else None
    point = branches.branch_point(body, await store.history(thread.id), parent)
    if point is None:
        return thread
    return await admission(request).branch(caller(request), thread, point.message_id)


def _answers_the_pause(body: RunAgentInput, thread: ThreadRow) -> bool:
    """Whether the input answers what the paused thread waits for (a `tool` message or a
    `resume` entry): it goes on where the thread waits, whatever history it repeats (CopilotKit
    re-sends its last user message with the answer)."""
    waiting = agui_input.answers(thread.pending_tool_calls or [])
    if not waiting:
        return False
    return any(entry.interrupt_id in waiting for entry in body.resume or []) or any(
        isinstance(m, ToolMessage) and m.tool_call_id in waiting for m in body.messages)


def _continuation(body: RunAgentInput, thread: ThreadRow | None, existing: RunRow) -> bool:
    """Whether an input naming a run the thread already ran continues it rather than retries
    it: its `resume` entries answer what the thread waits for now. CopilotKit's `useInterrupt`
    sends the answer under the interrupted run's `runId` (a retry could not know the interrupt
    ids, and a repeated answer finds the thread moved on). The continuation is a new run, which
    the client's events call by the gateway's run id, the client's name being taken."""
    if thread is None or existing.thread_id != thread.id or not body.resume:
        return False
    waiting = agui_input.answers(thread.pending_tool_calls or [])
    return any(entry.interrupt_id in waiting for entry in body.resume)


async def _scoped_thread(request: Request, project: str, thread_id: str,
                         user_key: str | None) -> ThreadRow | None:
    thread = await services(request).store.get_thread_by_client_id(project, thread_id)
    if thread is not None and not may_see(request, thread, user_key):
        raise _not_found(thread_id)
    return thread


def _not_found(thread_id: str) -> ApiError:
    return ApiError(Problem.THREAD_NOT_FOUND, f"Thread {echo(thread_id)} not found",
                    threadId=echo(thread_id))


async def agui_run(request: Request) -> tuple[ThreadRow, RunRow]:
    """The thread and run the path names by the client's ids (`get_thread_by_client_id`), if
    the caller may see the thread; else 404."""
    thread_id, run_id = request.path_params["thread_id"], request.path_params["run_id"]
    store = services(request).store
    project = project_of(request)
    thread, run = await asyncio.gather(store.get_thread_by_client_id(project, thread_id),
                                       store.get_run_by_client_id(project, run_id))
    if thread is None or not may_see(request, thread, user_scope(request),
                                     scope_optional=True):
        raise _not_found(thread_id)
    if run is None or run.thread_id != thread.id:
        raise ApiError(Problem.RUN_NOT_FOUND,
                       f"Run {echo(run_id)} not found on thread {echo(thread_id)}",
                       threadId=echo(thread_id), runId=echo(run_id))
    return thread, run


async def get_run(request: Request) -> Response:
    """Reconnect: the run's AG-UI events after the cursor, live until the run ends."""
    thread, run = await agui_run(request)
    return agui_stream(request, client_ids(thread, run)[0], run, event_cursor(request))


async def thread_status(request: Request) -> Response:
    """Whether a run is active on the thread, and which: a thread the caller may not see, or
    none, reads as idle (as `connect` reads it as empty)."""
    thread_id = request.path_params["thread_id"]
    scope = user_scope(request)  # checked whether or not the thread exists
    store = services(request).store
    thread = await store.get_thread_by_client_id(project_of(request), thread_id)
    if thread is not None and not may_see(request, thread, scope, scope_optional=True):
        thread = None
    active = _active(thread) if thread is not None else None
    run = await store.get_run(active) if active is not None else None
    status = snapshot.ThreadStatus(threadId=thread_id, running=run is not None,
                                   runId=client_ids(thread, run)[1] if thread and run else None)
    return JSONResponse(wire(status))


async def cancel_run(request: Request) -> Response:
    """Cancel the run (idempotent), as `DELETE /v1/threads/{id}/runs/{runId}` does."""
    thread, run = await agui_run(request)
    return await cancelled(request, run, client_ids(thread, run)[1])


# -- connect: an AG-UI client (re)loads a thread ------------------------------------------------
#
# What `connectAgent()` of `@ag-ui/client` and CopilotKit's runtime `connect` expect: one SSE
# stream that gives the client the thread as it is, then follows its active run. Its `threadId`
# names the thread (as for a run); its `runId` names the snapshot.
#
# 1. `RUN_STARTED` (the input's `runId`), `MESSAGES_SNAPSHOT` (the thread's messages in AG-UI
#    shape: `snapshot.py`), `STATE_SNAPSHOT` (its components, the client tool calls and the
#    interrupts it waits for), `RUN_FINISHED` (for a 1.0 client, as the paused run ended: an
#    `interrupt` outcome when a human must answer, else `outcome.pendingToolCallIds` when it waits
#    for client tool results). These events carry no SSE id.
# 2. If a run is active, its own events from its start (the same events, with the same ids, as
#    `GET /v1/agui/threads/{threadId}/runs/{runId}`), live until it ends. Its output is not in the
#    snapshot, so nothing arrives twice; its input (the user's message) is.
#
# With a cursor (`Last-Event-ID` or `?after=N`), the client already holds the snapshot: the
# stream is the thread's latest run (active, or the one that just ended) after event N.
#
# A thread that does not exist, or that the caller may not see, is an empty thread (no 404): the
# answer never tells whether a thread id is taken.


async def connect(request: Request) -> Response:
    asked = request.path_params["agent"]
    door, who = admission(request), caller(request)
    door.agent(who, None, asked)  # an unknown agent is a 404 before the body is read
    body: RunAgentInput = await json_body(request, agui_input.GatewayRunInput)
    store = services(request).store
    scope = user_scope(request, agui_input.forwarded(body, "userKey"))
    thread = await store.get_thread_by_client_id(who.project, body.thread_id)
    if thread is not None and not may_see(request, thread, scope):
        thread = None
    if thread is not None:
        door.agent(who, thread, asked)  # another agent's thread: 409, as for a run
    cursor = event_cursor(request)
    if cursor:
        return sse_response(request, _latest_run(request, thread, cursor), _headers(thread))
    return sse_response(request, _thread(request, body, thread), _headers(thread))


def _headers(thread: ThreadRow | None) -> dict[str, str]:
    return {"X-Thread-Id": thread.id} if thread is not None else {}


def _active(thread: ThreadRow) -> str | None:
    return thread.current_run_id if thread.run_status != "idle" else None


async def _thread(request: Request, body: RunAgentInput, thread: ThreadRow | None
                  ) -> AsyncIterator[dict[str, str] | bytes]:
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
    messages: list[Message] = []
    state: dict[str, Any] = {}
    waiting: list[dict[str, Any]] = []
    if thread is not None:
        store = services(request).store
        rows = await store.history(thread.id)
        active = _active(thread)
        components = snapshot.rendered(rows, active)
        current = {c.id: c.state for c in (await store.components_of(thread.id)).values()
                   if c.state is not None}
        messages = snapshot.with_component_answers(
            snapshot.messages(rows, active, media=body.protocol_version is not None),
            components)
        waiting = (thread.pending_tool_calls or []) if active is None else []
        # The shared state the thread keeps (`thread_state.py`), then what the gateway fills.
        state = {**(thread.state or {}), **snapshot.state(components, current, waiting)}
    events: list[BaseEvent] = [
        RunStartedEvent(thread_id=thread_id, run_id=run_id, protocol_version=PROTOCOL_VERSION),
        MessagesSnapshotEvent(messages=messages), StateSnapshotEvent(snapshot=state),
        RunFinishedEvent(thread_id=thread_id, run_id=run_id,
                         outcome=_outcome(body, waiting))]
    for event in events:
        event.timestamp = now
    return events


def _outcome(body: RunAgentInput, waiting: list[dict[str, Any]]) -> RunFinishedOutcome | None:
    """What the snapshot's run ends with, as the paused run's own `RUN_FINISHED` said it (for
    a 1.0 client; one before 1.0 knows no outcome): the interrupts a human must answer (so
    `HttpAgent` holds them as `pendingInterrupts` and its next run answers them with
    `resume[]`), else the client tool calls it must answer. One before 1.0 that opted into
    interrupts gets them (it knows no other outcome member)."""
    asked = snapshot.interrupts(waiting)
    if asked and (body.protocol_version is not None
                  or agui_input.opts_into_interrupts(body.forwarded_props)):
        return RunFinishedInterruptOutcome(interrupts=asked)
    if body.protocol_version is None:
        return None
    calls = [p["toolCallId"] for p in waiting if not agui.asks_a_human(p)]
    return RunFinishedSuccessOutcome(pending_tool_call_ids=calls or None)


async def _latest_run(request: Request, thread: ThreadRow | None, cursor: int
                      ) -> AsyncIterator[bytes | dict[str, str]]:
    run_id = thread and (_active(thread) or thread.last_completed_run_id)
    if thread is not None and run_id:
        async for message in _run_after(request, thread, run_id, cursor):
            yield message


async def _run_after(request: Request, thread: ThreadRow, run_id: str, after: int
                     ) -> AsyncIterator[bytes | dict[str, str]]:
    run = await services(request).store.get_run(run_id)
    if run is None:
        return
    async for message in run_events(request, run.id, after,
                                    run_dialect(client_ids(thread, run)[0], run),
                                    agui.encode):
        yield message


routes = [
    Route("/v1/agui/agents/{agent}/capabilities", routes_capabilities.agent_capabilities,
          methods=["GET"]),
    Route("/v1/agui/agents/{agent}/connect", connect, methods=["POST"]),
    Route("/v1/agui/agents/{agent}/run", run_agent, methods=["POST"]),
    Route("/v1/agui/threads", routes_threads.list_threads, methods=["GET"]),
    Route("/v1/agui/threads/{thread_id}", thread_status, methods=["GET"]),
    Route("/v1/agui/threads/{thread_id}/runs/{run_id}", get_run, methods=["GET"]),
    Route("/v1/agui/threads/{thread_id}/runs/{run_id}", cancel_run, methods=["DELETE"]),
]
