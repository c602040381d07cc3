"""The operator API's listings: a project's threads and runs across user scopes, with filters;
one run with its error, time to first token and usage; its stored log frames; and a thread's
conversation as the client API renders it. Every listing is a bounded page (keyset cursor) over
a bounded time window (`params.MAX_WINDOW_DAYS`), so no call scans without end."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...protocol.admin import (
    AdminConversation,
    AdminFrame,
    AdminFrameList,
    AdminRun,
    AdminRunDetail,
    AdminRunError,
    AdminRunList,
    AdminThread,
    AdminThreadList,
    AdminUsage,
)
from ...protocol.clock import iso_ms
from ...protocol.problems import ApiError, Problem, echo
from ...protocol.tambo import wire
from ...store.cursors import InvalidCursor
from ..context import int_param, query_user_key, services
from ..render import message_model
from .access import admin_project
from .params import agent_filter, agent_of, statuses, window

CONVERSATION_MESSAGES = 200  # the newest of a thread's messages the console shows


# -- rendering ------------------------------------------------------------------------------------

def _run(request: Request, row: Any, usage: dict[str, Any] | None) -> dict[str, Any]:
    error = row.error if isinstance(row.error, dict) else None
    return {"id": row.id, "threadId": row.thread_id, "userKey": row.user_key,
            "agent": agent_of(request, row.thread_agent), "model": row.model,
            "status": row.status, "apiKeyId": usage.get("apiKeyId") if usage else None,
            "createdAt": iso_ms(row.created_ms),
            "startedAt": iso_ms(row.started_ms) if row.started_ms else None,
            "finishedAt": iso_ms(row.finished_ms) if row.finished_ms else None,
            "durationMs": (row.finished_ms - row.started_ms
                           if row.finished_ms and row.started_ms else None),
            "queuedMs": row.started_ms - row.created_ms if row.started_ms else None,
            "error": AdminRunError(code=error.get("code"), message=str(error.get("message", "")),
                                   category=error.get("category")) if error else None,
            "usage": AdminUsage(**{k: v for k, v in usage.items() if k != "apiKeyId"})
            if usage else None}


# -- routes ---------------------------------------------------------------------------------------

async def list_threads(request: Request) -> Response:
    span = window(request, "updatedSince", "updatedUntil")
    status = request.query_params.get("status")
    if status not in (None, "", "idle", "running"):
        raise ApiError(Problem.VALIDATION_ERROR, "status must be idle or running",
                       errors={"status": "idle or running"})
    try:
        page = await services(request).store.admin_threads(
            span, int_param(request, "limit", 50, 1, 200), request.query_params.get("cursor"),
            user_key=query_user_key(request), agent=agent_filter(request),
            busy=None if not status else status == "running")
    except InvalidCursor:
        raise ApiError(Problem.INVALID_CURSOR, "The cursor is not valid") from None
    threads = [AdminThread(
        id=t.id, name=t.name, userKey=t.user_key, agent=agent_of(request, t.agent),
        status="idle" if t.run_status == "idle" else "running", currentRunId=t.current_run_id,
        waiting=t.run_status == "idle" and bool(t.pending_tool_calls),
        lastRunError={k: t.last_run_error.get(k) for k in ("code", "message")}
        if isinstance(t.last_run_error, dict) else None,
        createdAt=iso_ms(t.created_ms), updatedAt=iso_ms(t.updated_ms)) for t in page.rows]
    return JSONResponse(wire(AdminThreadList(threads=threads, hasMore=page.has_more,
                                             nextCursor=page.next_cursor)))


async def list_runs(request: Request) -> Response:
    span, wanted = window(request), statuses(request)
    store = services(request).store
    try:
        page = await store.admin_runs(
            span, int_param(request, "limit", 50, 1, 200), request.query_params.get("cursor"),
            statuses=wanted, user_key=query_user_key(request), agent=agent_filter(request),
            thread_id=request.query_params.get("threadId") or None)
    except InvalidCursor:
        raise ApiError(Problem.INVALID_CURSOR, "The cursor is not valid") from None
    usage = await store.admin_runs_usage([row.id for row in page.rows])
    runs = [AdminRun(**_run(request, row, usage.get(row.id))) for row in page.rows]
    return JSONResponse(wire(AdminRunList(runs=runs, hasMore=page.has_more,
                                          nextCursor=page.next_cursor)))


async def _found_run(request: Request) -> Any:
    run_id = request.path_params["run_id"]
    row = await services(request).store.admin_run(admin_project(request), run_id)
    if row is None:
        raise ApiError(Problem.RUN_NOT_FOUND, f"Run {echo(run_id)} not found",
                       runId=echo(run_id))
    return row


async def get_run(request: Request) -> Response:
    row = await _found_run(request)
    store = services(request).store
    usage = (await store.admin_runs_usage([row.id])).get(row.id)
    last = await store.last_frame(row.id)
    first = row.first_token_ms  # stored with the run's end (`runs/log/recorder.py`)
    detail = AdminRunDetail(**_run(request, row, usage), frames=last.seq if last else 0,
                            firstTokenMs=first - row.started_ms
                            if first is not None and row.started_ms else None)
    return JSONResponse(wire(detail))


async def run_frames(request: Request) -> Response:
    row = await _found_run(request)
    after = int_param(request, "after", 0, 0, 2**62)
    limit = int_param(request, "limit", 200, 1, 1000)
    frames = await services(request).store.read_frames(row.id, after, limit + 1)
    more = len(frames) > limit
    frames = frames[:limit]
    body = AdminFrameList(frames=[AdminFrame(seq=f.seq, at=iso_ms(f.ts_ms), frame=f.frame)
                                  for f in frames], hasMore=more,
                          nextAfter=frames[-1].seq if more else None)
    return JSONResponse(wire(body))


async def conversation(request: Request) -> Response:
    """A thread's newest messages, rendered as the client API renders them, for the console's
    conversation beside a run's log; any user scope's thread of the admin's project."""
    project = admin_project(request)
    thread_id = request.path_params["thread_id"]
    store = services(request).store
    thread = await store.get_thread(project, thread_id)
    if thread is None:
        raise ApiError(Problem.THREAD_NOT_FOUND, f"Thread {echo(thread_id)} not found",
                       threadId=echo(thread_id))
    page = await store.list_messages(thread.id, CONVERSATION_MESSAGES, None, descending=True)
    body = AdminConversation(id=thread.id, name=thread.name, userKey=thread.user_key,
                             agent=agent_of(request, thread.agent),
                             messages=[message_model(row) for row in reversed(page.rows)],
                             hasMore=page.has_more)
    return JSONResponse(wire(body))


routes = [
    Route("/v1/admin/threads", list_threads, methods=["GET"]),
    Route("/v1/admin/threads/{thread_id}/messages", conversation, methods=["GET"]),
    Route("/v1/admin/runs", list_runs, methods=["GET"]),
    Route("/v1/admin/runs/{run_id}", get_run, methods=["GET"]),
    Route("/v1/admin/runs/{run_id}/frames", run_frames, methods=["GET"]),
]
