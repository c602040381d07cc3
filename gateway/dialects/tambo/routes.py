"""The Tambo dialect's run endpoints: start (streaming), reconnect, status, list, cancel.

A start parses its request into a `RunSpec`, submits it through the door every run start goes
through (`runs/admission/submit.py`: who may start what), and streams the run.

A run response is only a subscriber of the run's log: it flushes SSE headers at once (the SDK's
timeout covers only the wait for headers), then replays the log from the cursor and follows it
live (`api/runs.py`, shared by every dialect). Closing it never loses anything:
`GET /v1/threads/{id}/runs/{runId}` with `Last-Event-ID` (or `?after=N`) continues after event
N, for a running, paused or finished run.
"""

from __future__ import annotations

from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...api.context import (
    admission,
    caller,
    int_param,
    json_body,
    project_of,
    required_user_scope,
    services,
    thread_for,
)
from ...api.render import run_model
from ...api.runs import cancel_run, event_cursor, event_stream, gated, run_in_thread
from ...protocol.problems import ApiError, Problem
from ...protocol.tambo import RunList, RunRequest, wire
from ...runs.admission.admit import StartedRun
from ...runs.admission.threads import NewThread, OnThread, Target
from ...store.tables import RunRow
from .input import keyed, run_spec
from .translate import TamboDialect, encode

IDEMPOTENCY_KEY_MAX = 255


def tambo_stream(request: Request, run: RunRow, after: int = 0,
                 extra_headers: dict[str, str] | None = None) -> EventSourceResponse:
    """A run's events in the Tambo dialect."""
    return event_stream(request, run, after, extra_headers, dialect=TamboDialect, encode=encode)


def _started_stream(request: Request, started: StartedRun) -> EventSourceResponse:
    """The response of a run request: the run's events from the first (a retry that attached
    to the run its key started replays it whole)."""
    extra = {"Idempotent-Replayed": "true"} if started.attached else None
    return tambo_stream(request, started.run, extra_headers=extra)


def idempotency_key(request: Request) -> str | None:
    key = request.headers.get("idempotency-key")
    if key is None:
        return None
    key = key.strip()
    if not key or len(key) > IDEMPOTENCY_KEY_MAX:
        raise ApiError(Problem.VALIDATION_ERROR,
                       f"Idempotency-Key must be 1 to {IDEMPOTENCY_KEY_MAX} characters")
    return key


@gated
async def run_new_thread(request: Request) -> Response:
    """`POST /v1/threads/runs`: a new thread and its first run, in one transaction. The
    gateway's `?agent=` (the playground's picker) names the new thread's agent, as the AG-UI
    path does; without it, the key's agent or the default."""
    body: RunRequest = await json_body(request, RunRequest)
    return await _start(request, body, _new_thread(request, body))


@gated
async def run_thread(request: Request) -> Response:
    """`POST /v1/threads/{id}/runs`: a run on the thread; with the Tambo v1 proposal's
    `createThread`, on a thread created under the path's id if there is none."""
    body: RunRequest = await json_body(request, RunRequest)
    thread_id = request.path_params["thread_id"]
    if body.createThread and await services(request).store.get_thread(
            project_of(request), thread_id) is None:
        return await _start(request, body, _new_thread(request, body, thread_id))
    return await _start(request, body, OnThread(
        await thread_for(request, body.userKey, body.contextKey)))


def _new_thread(request: Request, body: RunRequest, thread_id: str | None = None) -> NewThread:
    """The thread a run request creates: the user scope it names, its metadata (the request's
    `threadMetadata`, else its thread's), under `thread_id` if the client chose one."""
    init = body.thread
    user_key = required_user_scope(request, init.userKey if init else None, body.userKey,
                                   body.contextKey)
    metadata = init.metadata if init else None
    if body.threadMetadata:
        return NewThread(user_key, body.threadMetadata, thread_id=thread_id,
                         unkept_metadata=(metadata,))
    return NewThread(user_key, metadata, thread_id=thread_id)


async def _start(request: Request, body: RunRequest, target: Target) -> Response:
    """The request's run on `target`, through the door (`runs/admission/submit.py`), as a
    stream; a new thread's agent is the one `?agent=` names."""
    asked = request.query_params.get("agent") if isinstance(target, NewThread) else None
    spec = keyed(run_spec(body, asked), body, idempotency_key(request))
    started = await admission(request).submit(caller(request), target, spec)
    return _started_stream(request, started)


async def get_run(request: Request) -> Response:
    """Reconnect (SSE from a cursor) or, with `Accept: application/json`, the run's status."""
    run = await run_in_thread(request)
    accept = request.headers.get("accept", "")
    if "application/json" in accept and "text/event-stream" not in accept:
        usage = await services(request).store.run_usage(run.id)
        return JSONResponse(wire(run_model(run, usage)))
    return tambo_stream(request, run, event_cursor(request))


async def list_runs(request: Request) -> Response:
    """The thread's runs, newest first, a page at a time, each with its usage (the
    playground's run list: status, duration, time to first token, tokens and cost)."""
    thread = await thread_for(request)
    limit = int_param(request, "limit", 20, 1, 100)
    store = services(request).store
    page = await store.list_runs(thread.id, limit, request.query_params.get("cursor"))
    usage = await store.runs_usage([r.id for r in page.rows])
    return JSONResponse(wire(RunList(runs=[run_model(r, usage.get(r.id)) for r in page.rows],
                                     hasMore=page.has_more, nextCursor=page.next_cursor)))


routes = [
    Route("/v1/threads/runs", run_new_thread, methods=["POST"]),
    Route("/v1/threads/{thread_id}/runs", run_thread, methods=["POST"]),
    Route("/v1/threads/{thread_id}/runs", list_runs, methods=["GET"]),
    Route("/v1/threads/{thread_id}/runs/{run_id}", get_run, methods=["GET"]),
    Route("/v1/threads/{thread_id}/runs/{run_id}", cancel_run, methods=["DELETE"]),
]
