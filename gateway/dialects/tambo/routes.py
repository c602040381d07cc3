"""The Tambo dialect's run endpoints: start (streaming), reconnect, status, list, cancel.

A run response is only a subscriber of the run's log: it flushes SSE headers at once (the SDK's
timeout covers only the wait for headers), then replays the log from the cursor and follows it
live (`api/runs.py`, shared by every dialect). Closing it never loses anything:
`GET /v1/threads/{id}/runs/{runId}` with `Last-Event-ID` (or `?after=N`) continues after event
N, for a running, paused or finished run.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.exc import IntegrityError
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...api.agent_choice import agent_for, check_client_prompt
from ...api.context import (
    int_param,
    json_body,
    project_of,
    quota_subjects,
    required_user_scope,
    services,
    thread_for,
)
from ...api.door import mark_run_start
from ...api.embedding import embedded_blocks, references, with_blocks
from ...api.render import run_model
from ...api.runs import (
    cancel_run,
    check_fits,
    check_run,
    event_cursor,
    event_stream,
    run_in_thread,
)
from ...api.stored_caps import check_metadata, check_thread_room
from ...api.threads import new_thread
from ...engine.agents.agent import ResolvedAgent
from ...protocol.problems import ApiError, Problem
from ...protocol.run_spec import RunSpec
from ...protocol.tambo import RunList, RunRequest, wire
from ...runs.admission.admit import NewThread, StartedRun
from ...store.tables import RunRow
from .input import keyed, run_spec
from .translate import TamboDialect, encode

IDEMPOTENCY_KEY_MAX = 255
# A thread id a client may create (`createThread`): as AG-UI clients' ids, it travels in URLs,
# headers and Redis keys.
THREAD_ID = re.compile(r"^[\x21-\x2e\x30-\x7e]{1,64}$")


def with_thread_id(thread: NewThread, thread_id: str) -> NewThread:
    """`thread` under the client's id (its initial messages too)."""
    thread.row.id = thread_id
    for message in thread.messages:
        message.thread_id = thread_id
    return thread


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


Blocks = list[dict[str, Any]] | None  # the user's blocks with resources embedded; None: as sent


@mark_run_start
async def run_new_thread(request: Request) -> Response:
    return await _gated_embedding(request, _run_on_new_thread)


@mark_run_start
async def run_thread(request: Request) -> Response:
    return await _gated_embedding(request, _run_thread)


async def _gated_embedding(request: Request,
                           start: Callable[[Request, RunRequest, RunSpec, Blocks],
                                           Awaitable[Response]]) -> Response:
    """The run start, whole, in the process's start gate (`api.runs.gated`); a request whose
    message names resources to embed (`embedResources`) leaves the gate to read them (it may
    take seconds: `api/embedding.py`) and takes another turn to start. The request's spec is
    made once, here, and handed to `start`."""
    gate = services(request).runs.start_gate
    async with gate.turn():
        body: RunRequest = await json_body(request, RunRequest)
        spec = run_spec(body)
        if not (body.embedResources and references(spec)):
            return await start(request, body, spec, None)
        check_run(request, spec)
    blocks = await embedded_blocks(request, spec, await _embedding_agent(request, body))
    async with gate.turn():
        return await start(request, body, spec, blocks)


async def _embedding_agent(request: Request, body: RunRequest) -> ResolvedAgent:
    """The agent whose MCP servers the request's resources are read from: the thread's, or
    the one a new thread gets."""
    thread_id = request.path_params.get("thread_id")
    if thread_id is None or body.createThread and await services(request).store.get_thread(
            project_of(request), thread_id) is None:
        return agent_for(request, None, request.query_params.get("agent"))
    return agent_for(request, await thread_for(request, body.userKey, body.contextKey))


async def _run_on_new_thread(request: Request, body: RunRequest, spec: RunSpec,
                             blocks: Blocks = None, thread_id: str | None = None) -> Response:
    """Create a thread (`thread_id`: the client's id for it, `createThread`) and start the
    request's run (`spec`, made from `body`) on it, in one transaction."""
    check_run(request, spec)
    # The gateway's `?agent=` (the playground's picker) names the new thread's agent, as the
    # AG-UI path does; without it, the key's agent or the default.
    agent = agent_for(request, None, request.query_params.get("agent"))
    check_client_prompt(agent, spec.seed_messages)
    spec = with_blocks(request, spec, blocks)
    check_fits(request, spec, agent)
    spec = dataclasses.replace(spec, agent=agent.name)
    project = project_of(request)
    init = body.thread
    user_key = required_user_scope(request, init.userKey if init else None, body.userKey,
                                   body.contextKey)
    settings = services(request).settings
    check_metadata(settings, body.threadMetadata, init.metadata if init else None)
    metadata = body.threadMetadata or (init.metadata if init else None)
    await check_thread_room(settings, services(request).store, project, user_key)
    thread = new_thread(project, user_key, metadata, spec.seed_messages, agent.name)
    if thread_id is not None:
        thread = with_thread_id(thread, thread_id)
    started = await services(request).runs.start_new_thread(
        project, thread, keyed(spec, body, idempotency_key(request)), user_key,
        subjects=quota_subjects(request, user_key))
    return _started_stream(request, started)


async def _run_thread(request: Request, body: RunRequest, spec: RunSpec, blocks: Blocks
                      ) -> Response:
    thread_id = request.path_params["thread_id"]
    if body.createThread and await services(request).store.get_thread(
            project_of(request), thread_id) is None:
        # The Tambo v1 proposal's `createThread`: the thread is created under the client's id.
        if not THREAD_ID.match(thread_id):
            raise ApiError(Problem.VALIDATION_ERROR, "A thread id to create must be 1 to 64 "
                           "printable ASCII characters without '/'", threadId=thread_id)
        try:
            return await _run_on_new_thread(request, body, spec, blocks, thread_id)
        except IntegrityError:  # taken meanwhile, or an id of another project's thread
            pass
    check_run(request, spec)
    thread = await thread_for(request, body.userKey, body.contextKey)
    agent = agent_for(request, thread)
    spec = with_blocks(request, spec, blocks)
    check_fits(request, spec, agent)
    spec = dataclasses.replace(spec, agent=agent.name)
    started = await services(request).runs.start(
        thread.project_id, thread, keyed(spec, body, idempotency_key(request)),
        subjects=quota_subjects(request, thread.user_key))
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
