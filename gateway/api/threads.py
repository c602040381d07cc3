"""Threads and their messages: `/v1/threads[/{id}]`, `/v1/threads/{id}/messages[/{messageId}]`,
and forks (`/v1/threads/{id}/fork`). A thread is created, and forked, through the door every run
start goes through (`runs/admission/submit.py`), under the same rules."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..protocol.clock import now_ms
from ..protocol.problems import ApiError, Problem, echo
from ..protocol.tambo import (
    ForkRequest,
    MessageList,
    ThreadCreateRequest,
    ThreadList,
    ThreadUpdateRequest,
    ThreadWithMessages,
    wire,
)
from ..runs.admission.threads import NewThread, check_metadata
from .context import (
    admission,
    caller,
    int_param,
    json_body,
    names_scope,
    project_of,
    required_user_scope,
    services,
    thread_for,
    user_scope,
)
from .render import message_model, thread_model, usage_model


async def create_thread(request: Request) -> Response:
    body: ThreadCreateRequest = await json_body(request, ThreadCreateRequest)
    who = caller(request)
    user_key = required_user_scope(request, body.userKey, body.contextKey)
    seeds = [m.seed() for m in body.initialMessages or []]
    thread = await admission(request).create_thread(who, NewThread(user_key, body.metadata),
                                                    seeds)
    return JSONResponse(wire(thread_model(thread)), status_code=201)


async def fork_thread(request: Request) -> Response:
    """A new thread from the thread's history up to and including `messageId`
    (`runs/admission/forks.py`)."""
    body: ForkRequest = await json_body(request, ForkRequest)
    original = await thread_for(request, body.userKey, body.contextKey)
    fork = await admission(request).fork(caller(request), original, body.messageId)
    copied = {row.id: row for row in fork.components}
    messages = [message_model(row, copied) for row in fork.messages]
    owner = user_scope(request, body.userKey, body.contextKey) is not None
    return JSONResponse(wire(thread_model(fork.thread, ThreadWithMessages, messages=messages,
                                          owner=owner)), status_code=201)


async def list_threads(request: Request) -> Response:
    project = project_of(request)
    limit = int_param(request, "limit", 20, 1, 100)
    page = await services(request).store.list_threads(
        project, required_user_scope(request), limit, request.query_params.get("cursor"))
    return JSONResponse(wire(ThreadList(threads=[thread_model(t) for t in page.rows],
                                        hasMore=page.has_more, nextCursor=page.next_cursor)))


async def get_thread(request: Request) -> Response:
    thread = await thread_for(request, scope_optional=True)
    store = services(request).store
    rows, components, usage = await asyncio.gather(
        store.history(thread.id), store.components_of(thread.id), store.thread_usage(thread.id))
    messages = [message_model(row, components) for row in rows]
    return JSONResponse(wire(thread_model(thread, ThreadWithMessages, messages=messages,
                                          owner=names_scope(request),
                                          usage=usage_model(usage))))


async def update_thread(request: Request) -> Response:
    body: ThreadUpdateRequest = await json_body(request, ThreadUpdateRequest)
    check_metadata(services(request).settings, body.metadata)
    thread = await thread_for(request, scope_optional=True)  # TamboClient renames without one
    changes: dict[str, Any] = {"updated_ms": now_ms()}
    if "name" in body.model_fields_set:
        changes["name"] = body.name
    if "metadata" in body.model_fields_set:
        changes["meta"] = body.metadata
    store = services(request).store
    await store.update_thread(thread.id, **changes)
    updated = await store.get_thread(thread.project_id, thread.id)
    assert updated is not None
    return JSONResponse(wire(thread_model(updated, owner=names_scope(request))))


async def delete_thread(request: Request) -> Response:
    thread = await thread_for(request)
    svc = services(request)
    if thread.current_run_id:
        await svc.runs.cancel(thread.current_run_id)
    await svc.store.delete_thread(thread.id)
    return Response(status_code=204)


async def list_messages(request: Request) -> Response:
    thread = await thread_for(request, scope_optional=True)  # @tambo-ai/react lists without one
    order = request.query_params.get("order", "asc")
    if order not in ("asc", "desc"):
        raise ApiError(Problem.VALIDATION_ERROR, "order must be 'asc' or 'desc'")
    limit = int_param(request, "limit", 50, 1, 200)
    store = services(request).store
    page = await store.list_messages(thread.id, limit, request.query_params.get("cursor"),
                                     descending=order == "desc")
    components = await store.components_of(thread.id)
    return JSONResponse(wire(MessageList(
        messages=[message_model(r, components) for r in page.rows], hasMore=page.has_more,
        nextCursor=page.next_cursor)))


async def get_message(request: Request) -> Response:
    thread = await thread_for(request)
    message_id = request.path_params["message_id"]
    store = services(request).store
    row = await store.get_message(thread.id, message_id)
    if row is None:
        raise ApiError(Problem.MESSAGE_NOT_FOUND, f"Message {echo(message_id)} not found",
                       threadId=thread.id, messageId=echo(message_id))
    return JSONResponse(wire(message_model(row, await store.components_of(thread.id))))


routes = [
    Route("/v1/threads", create_thread, methods=["POST"]),
    Route("/v1/threads", list_threads, methods=["GET"]),
    Route("/v1/threads/{thread_id}", get_thread, methods=["GET"]),
    Route("/v1/threads/{thread_id}", update_thread, methods=["PATCH"]),
    Route("/v1/threads/{thread_id}", delete_thread, methods=["DELETE"]),
    Route("/v1/threads/{thread_id}/messages", list_messages, methods=["GET"]),
    Route("/v1/threads/{thread_id}/messages/{message_id}", get_message, methods=["GET"]),
    Route("/v1/threads/{thread_id}/fork", fork_thread, methods=["POST"]),
]
