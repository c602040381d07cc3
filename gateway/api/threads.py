"""Threads and their messages: `/v1/threads[/{id}]`, `/v1/threads/{id}/messages[/{messageId}]`,
and forks (`/v1/threads/{id}/fork`). A thread is created, and forked, through the door every run
start goes through (`runs/admission/submit.py`), under the same rules."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime
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
from ..store.queries.admin import AgentFilter
from ..store.queries.thread_search import ThreadFilter
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
    """The caller's threads, newest first, narrowed by the search filters (`thread_filter`)
    and, with `count=true`, how many match (up to `MAX_COUNT`)."""
    project = project_of(request)
    limit = int_param(request, "limit", 20, 1, 100)
    scope = required_user_scope(request)
    match = thread_filter(request)
    store = services(request).store
    cursor = request.query_params.get("cursor")
    if match == ThreadFilter():
        page = await store.list_threads(project, scope, limit, cursor)
    else:
        page = await store.search_threads(project, scope, match, limit, cursor)
    extra: dict[str, Any] = {}
    if _flag(request, "count"):
        total = await store.count_matching_threads(project, scope, match, MAX_COUNT + 1)
        extra = {"count": min(total, MAX_COUNT), "countCapped": total > MAX_COUNT}
    return JSONResponse(wire(ThreadList(threads=[thread_model(t) for t in page.rows],
                                        hasMore=page.has_more, nextCursor=page.next_cursor,
                                        **extra)))


# Thread search's bounds: how many metadata filters a call may give, how long a key and a
# value may be, and how far a count goes.
MAX_METADATA_FILTERS = 8
MAX_FILTER_VALUE = 256
MAX_COUNT = 10_000
METADATA_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")
THREAD_STATUSES = ("idle", "waiting", "streaming")


def thread_filter(request: Request) -> ThreadFilter:
    """The search filters of a thread list call: `metadata.<key>=<value>` (string values,
    each a separate condition), `status`, `agent`, `namePrefix`, and `createdAfter`,
    `createdBefore`, `updatedAfter`, `updatedBefore` (ISO-8601). Bounded in number and size;
    a malformed one is refused (400), never ignored: a filter dropped silently would widen the
    answer."""
    params = request.query_params
    metadata: list[tuple[str, str]] = []
    for name, value in params.multi_items():
        if not name.startswith("metadata."):
            continue
        key = name[len("metadata."):]
        if not METADATA_KEY.fullmatch(key):
            raise ApiError(Problem.VALIDATION_ERROR, "A metadata filter's key is 1 to 64 "
                           "letters, digits, '_' or '-'", errors={"metadata": "invalid key"})
        metadata.append((key, _bounded(name, value)))
    if len(metadata) > MAX_METADATA_FILTERS:
        raise ApiError(Problem.VALIDATION_ERROR,
                       f"At most {MAX_METADATA_FILTERS} metadata filters")
    status = params.get("status")
    if status is not None and status not in THREAD_STATUSES:
        raise ApiError(Problem.VALIDATION_ERROR, "status must be one of "
                       + ", ".join(THREAD_STATUSES), errors={"status": "unknown status"})
    agent = params.get("agent") or None
    name_prefix = params.get("namePrefix") or None
    return ThreadFilter(
        metadata=tuple(metadata), status=status,
        agent=AgentFilter(_bounded("agent", agent)[:64],
                          or_unset=agent == services(request).agents.default_name)
        if agent else None,
        name_prefix=_bounded("namePrefix", name_prefix) if name_prefix else None,
        created_after=instant(request, "createdAfter"),
        created_before=instant(request, "createdBefore"),
        updated_after=instant(request, "updatedAfter"),
        updated_before=instant(request, "updatedBefore"))


def instant(request: Request, name: str) -> int | None:
    """An ISO-8601 date or time of the query string as epoch milliseconds (UTC unless it
    says otherwise)."""
    raw = request.query_params.get(name)
    if raw is None:
        return None
    try:
        at = datetime.fromisoformat(raw[:-1] + "+00:00" if raw[-1:] in ("Z", "z") else raw)
    except ValueError:
        raise ApiError(Problem.VALIDATION_ERROR, f"{name} must be an ISO-8601 date or time",
                       errors={name: "not an ISO-8601 date or time"}) from None
    return int((at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp() * 1000)


def _bounded(name: str, value: str) -> str:
    if len(value) > MAX_FILTER_VALUE:
        raise ApiError(Problem.VALIDATION_ERROR,
                       f"{echo(name)} is longer than {MAX_FILTER_VALUE} characters")
    return value


def _flag(request: Request, name: str) -> bool:
    raw = request.query_params.get(name)
    if raw in (None, "false"):
        return False
    if raw == "true":
        return True
    raise ApiError(Problem.VALIDATION_ERROR, f"{name} must be true or false")


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
