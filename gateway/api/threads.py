"""Threads and their messages: `/v1/threads[/{id}]`, `/v1/threads/{id}/messages[/{messageId}]`."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..protocol.clock import new_id, now_ms
from ..protocol.problems import ApiError, Problem, echo
from ..protocol.run_spec import SeedMessage
from ..protocol.tambo import (
    MessageList,
    ThreadCreateRequest,
    ThreadList,
    ThreadUpdateRequest,
    ThreadWithMessages,
    wire,
)
from ..runs.admission.admit import NewThread
from ..store.rows import made
from ..store.tables import MessageRow, ThreadRow
from .agent_choice import agent_for, check_client_prompt
from .context import (
    int_param,
    json_body,
    names_scope,
    project_of,
    required_user_scope,
    services,
    thread_for,
)
from .render import message_model, thread_model, usage_model
from .stored_caps import check_initial_messages, check_metadata, check_thread_room


def new_thread(project: str, user_key: str | None, metadata: dict[str, Any] | None,
               initial: list[SeedMessage], agent: str | None = None) -> NewThread:
    """A thread and its initial messages, not written yet; shared by `POST /v1/threads` and
    new-thread runs (which write it in the transaction that starts the run)."""
    now = now_ms()
    thread = made(ThreadRow, id=new_id("thr_"), project_id=project, user_key=user_key, meta=metadata,
                       created_ms=now, updated_ms=now, agent=agent)
    return NewThread(thread, [initial_message_row(thread.id, message, now, user_key, agent)
                              for message in initial])


def initial_message_row(thread_id: str, message: SeedMessage, now: int,
                        user_key: str | None = None, agent: str | None = None) -> MessageRow:
    """A seeded message as stored; `sender` (Timbal's) is the user scope on the user's, the
    thread's agent on the assistant's, when known."""
    part: dict[str, Any]
    if message.role == "assistant":
        part = {"id": new_id(), "type": "agent", "content": message.text}
        sender = agent
    elif message.role == "system":
        part = {"id": new_id(), "type": "x-system", "content": message.text}
        sender = None
    else:
        part = {"id": new_id(), "type": "user", "content": message.text}
        sender = user_key
    if sender:
        part["sender"] = sender
    return made(MessageRow, id=new_id(), thread_id=thread_id, role=message.role, parts=[part],
                      created_ms=now)


async def create_thread(request: Request) -> Response:
    body: ThreadCreateRequest = await json_body(request, ThreadCreateRequest)
    project = project_of(request)
    user_key = required_user_scope(request, body.userKey, body.contextKey)
    seeds = [m.seed() for m in body.initialMessages or []]
    agent = agent_for(request, None)
    check_client_prompt(agent, seeds)
    settings = services(request).settings
    check_metadata(settings, body.metadata)
    check_initial_messages(settings, [m.text for m in seeds])
    await check_thread_room(settings, services(request).store, project, user_key)
    thread = new_thread(project, user_key, body.metadata, seeds, agent.name)
    await services(request).store.add(thread.row, *thread.messages)
    return JSONResponse(wire(thread_model(thread.row)), status_code=201)


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
]
