"""Runs: start (streaming), reconnect, status, list, cancel.

A run response is only a subscriber of the run's log: it flushes SSE headers at once (the SDK's
timeout covers only the wait for headers), then replays the log from the cursor and follows it
live. Closing it never loses anything.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..protocol.clock import iso_ms
from ..protocol.problems import ApiError
from ..protocol.tambo import RunRequest
from ..runs.views import tambo_events
from ..store.tables import RunRow
from .context import (body_user_key, int_param, json_body, project_of, query_user_key, services,
                      thread_for)
from .threads import create_thread_row


def _compact(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


def event_stream(request: Request, run: RunRow, after: int = 0,
                 extra_headers: dict[str, str] | None = None) -> EventSourceResponse:
    svc = services(request)

    async def frames() -> AsyncIterator[dict[str, str]]:
        async for position, event in tambo_events(svc.runs.entries(run.id), after):
            yield {"data": _compact(event), "id": str(position)}

    headers = {"Cache-Control": "no-cache", "Connection": "keep-alive", "X-Run-Id": run.id,
               "X-Thread-Id": run.thread_id, **(extra_headers or {})}
    return EventSourceResponse(frames(), ping=svc.settings.heartbeat_seconds, sep="\n",
                               headers=headers)


async def run_new_thread(request: Request) -> Response:
    body: RunRequest = await json_body(request, RunRequest)
    project = project_of(request)
    init = body.thread
    user_key = query_user_key(request) or body_user_key(
        init.userKey if init else None, body.userKey, body.contextKey)
    metadata = body.threadMetadata or (init.metadata if init else None)
    thread = await create_thread_row(request, project, user_key, metadata,
                                     init.initialMessages if init else None)
    run = await services(request).runs.start(project, thread, body,
                                              request.headers.get("idempotency-key"))
    return event_stream(request, run)


async def run_thread(request: Request) -> Response:
    body: RunRequest = await json_body(request, RunRequest)
    user_key = query_user_key(request) or body_user_key(body.userKey, body.contextKey)
    thread = await thread_for(request, user_key)
    run = await services(request).runs.start(thread.project_id, thread, body,
                                              request.headers.get("idempotency-key"))
    return event_stream(request, run)


async def _run_in_thread(request: Request) -> RunRow:
    thread = await thread_for(request)
    run_id = request.path_params["run_id"]
    run = await services(request).store.get_run(run_id)
    if run is None or run.thread_id != thread.id:
        raise ApiError(404, "RUN_NOT_FOUND", f"Run {run_id} not found on thread {thread.id}",
                       threadId=thread.id, runId=run_id)
    return run


def run_json(run: RunRow) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": run.id,
        "threadId": run.thread_id,
        "status": run.status,
        "createdAt": iso_ms(run.created_ms),
        "startedAt": iso_ms(run.started_ms) if run.started_ms else None,
        "finishedAt": iso_ms(run.finished_ms) if run.finished_ms else None,
        "previousRunId": run.previous_run_id,
        "pendingToolCalls": run.pending_tool_calls,
        "error": run.error if run.status == "failed" else None,
    }
    return {k: v for k, v in body.items() if v is not None}


async def get_run(request: Request) -> Response:
    """Reconnect (SSE from a cursor) or, with `Accept: application/json`, the run's status."""
    run = await _run_in_thread(request)
    accept = request.headers.get("accept", "")
    if "application/json" in accept and "text/event-stream" not in accept:
        return JSONResponse(run_json(run))
    cursor = request.query_params.get("after") or request.headers.get("last-event-id") or "0"
    try:
        after = int(cursor)
    except ValueError:
        raise ApiError(400, "INVALID_CURSOR", "The event cursor must be an integer") from None
    if after < 0:
        raise ApiError(400, "INVALID_CURSOR", "The event cursor must not be negative")
    return event_stream(request, run, after)


async def list_runs(request: Request) -> Response:
    thread = await thread_for(request)
    limit = int_param(request, "limit", 20, 1, 100)
    page = await services(request).store.list_runs(thread.id, limit,
                                                   request.query_params.get("cursor"))
    body: dict[str, Any] = {"runs": [run_json(r) for r in page.rows], "hasMore": page.has_more}
    if page.next_cursor:
        body["nextCursor"] = page.next_cursor
    return JSONResponse(body)


async def cancel_run(request: Request) -> Response:
    """Cancel a run; idempotent. A run that already ended reports how it ended."""
    run = await _run_in_thread(request)
    svc = services(request)
    await svc.runs.cancel(run.id)
    final = await svc.store.get_run(run.id) or run
    return JSONResponse({"runId": run.id, "status": final.status})


routes = [
    Route("/v1/threads/runs", run_new_thread, methods=["POST"]),
    Route("/v1/threads/{thread_id}/runs", run_thread, methods=["POST"]),
    Route("/v1/threads/{thread_id}/runs", list_runs, methods=["GET"]),
    Route("/v1/threads/{thread_id}/runs/{run_id}", get_run, methods=["GET"]),
    Route("/v1/threads/{thread_id}/runs/{run_id}", cancel_run, methods=["DELETE"]),
]
