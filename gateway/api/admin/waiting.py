"""The threads waiting for a human, and answering them from the console.

A run that pauses (`awaiting_input`) leaves its thread idle with pending calls: a server tool
waiting for approval, a tool's question, or a client tool the app has not answered
(`ThreadRow.pending_tool_calls`). `GET /v1/admin/waiting` lists the project's paused threads,
most recently paused first, each with its calls; `POST /v1/admin/threads/{id}/answers` answers
them as a client would, with one tool result per pending call, which starts the thread's next
run: admitted like any continuation (one answer wins, a second finds the thread moved on), and
metered against the admin key and the thread's user scope. The run goes on by itself; nobody
has to watch it.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...engine.tools import elicitation
from ...protocol.admin import (
    AdminAnswered,
    AdminAnswers,
    AdminPendingCall,
    AdminWaitingList,
    AdminWaitingThread,
)
from ...protocol.approvals import RESPONSE_SCHEMA
from ...protocol.clock import iso_ms, now_ms, parse_iso_ms
from ...protocol.problems import ApiError, Problem, echo
from ...protocol.run_spec import RunSpec, ToolResult
from ...protocol.tambo import wire
from ...runs.admission.threads import OnThread
from ...store.cursors import InvalidCursor
from ...store.tables import ThreadRow
from ..context import admin_caller, admission, int_param, json_body, services
from ..door import mark_run_start
from .params import agent_of, window


def pending_call(entry: dict[str, Any], now: int) -> AdminPendingCall:
    request = entry.get("approval") if isinstance(entry.get("approval"), dict) else None
    kind = ("clientTool" if request is None else
            "question" if request.get("reason") == elicitation.REASON else "approval")
    expires = request.get("expiresAt") if request else None
    schema = request.get("responseSchema") if request else None
    if kind == "approval" and schema is None:
        schema = RESPONSE_SCHEMA
    return AdminPendingCall(
        toolCallId=str(entry.get("toolCallId")), toolName=str(entry.get("toolName")),
        arguments=str(entry.get("arguments") or "{}"), kind=kind,
        message=request.get("message") if request else None,
        responseSchema=schema if isinstance(schema, dict) else None,
        expiresAt=expires, expired=isinstance(expires, str) and parse_iso_ms(expires) < now,
        rule=request.get("rule") if request else None)


async def list_waiting(request: Request) -> Response:
    span = window(request, "updatedSince", "updatedUntil")
    try:
        page = await services(request).store.admin_threads(
            span, int_param(request, "limit", 50, 1, 200), request.query_params.get("cursor"),
            waiting=True)
    except InvalidCursor:
        raise ApiError(Problem.INVALID_CURSOR, "The cursor is not valid") from None
    now = now_ms()
    threads = [AdminWaitingThread(
        id=t.id, name=t.name, userKey=t.user_key, agent=agent_of(request, t.agent),
        runId=t.last_completed_run_id, updatedAt=iso_ms(t.updated_ms),
        calls=[pending_call(entry, now) for entry in t.pending_tool_calls or []])
        for t in page.rows]
    return JSONResponse(wire(AdminWaitingList(threads=threads, hasMore=page.has_more,
                                              nextCursor=page.next_cursor)))


def tool_result(answer: Any, is_error: bool, tool_call_id: str) -> ToolResult:
    text = answer if isinstance(answer, str) else json.dumps(answer)
    return ToolResult(tool_call_id, [{"type": "text", "text": text}], is_error=is_error)


async def answer(request: Request) -> Response:
    who = admin_caller(request)  # its runs count against the admin key's quotas
    project = who.project
    svc = services(request)
    async with svc.runs.start_gate.turn():
        body: AdminAnswers = await json_body(request, AdminAnswers)
        thread_id = request.path_params["thread_id"]
        thread = await svc.store.get_thread(project, thread_id)
        if thread is None:
            raise ApiError(Problem.THREAD_NOT_FOUND, f"Thread {echo(thread_id)} not found",
                           threadId=echo(thread_id))
        if thread.run_status != "idle" or not thread.pending_tool_calls:
            raise ApiError(Problem.THREAD_NOT_WAITING, f"Thread {thread.id} is not waiting for "
                           "an answer", threadId=thread.id)
        spec = await _continuation(request, thread, body)
        started = await admission(request).submit(who, OnThread(thread), spec)
    return JSONResponse(wire(AdminAnswered(threadId=thread.id, runId=started.run.id,
                                           status=started.run.status)), status_code=202)


async def _continuation(request: Request, thread: ThreadRow, body: AdminAnswers) -> RunSpec:
    """The run the answers start: the paused run's client tools and components offered again
    (as the app would send them with its results), the thread's agent."""
    paused = (await services(request).store.get_run(thread.last_completed_run_id)
              if thread.last_completed_run_id else None)
    before = RunSpec.from_row(paused.request if paused is not None else None)
    return RunSpec(tool_results=[tool_result(a.result, a.isError, a.toolCallId)
                                 for a in body.answers],
                   client_tools=before.client_tools, components=before.components,
                   previous_run_id=thread.last_completed_run_id,
                   agent=agent_of(request, thread.agent))


routes = [
    Route("/v1/admin/waiting", list_waiting, methods=["GET"]),
    Route("/v1/admin/threads/{thread_id}/answers", mark_run_start(answer), methods=["POST"]),
]
