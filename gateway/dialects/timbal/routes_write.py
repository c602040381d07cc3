"""The Timbal HTTP/1.0 write path (`spec/http.md`): create a thread, send a message, cancel.

- `POST /v1/timbal/threads/{threadId}`: the client chooses the id (a UUID). 201 `created`;
  the same request again (same body, same user scope) 200 `exists`; another request on a taken
  id 409 `conflict`; an id that is not a UUID 400. The body chooses the agent and carries the
  user scope (`input.ThreadCreate`); only its SHA-256 is kept.
- `POST /v1/timbal/threads/{threadId}/messages` `{content, metadata?}`: 202 with the user
  message's id (its frame's `i` on the WebSocket); the run starts at once and runs to its end
  whoever watches. 404 for a thread the caller cannot see, 409 while a run is active.
- `POST /v1/timbal/threads/{threadId}/cancel`: 200 `cancelling` (the run's log ends with its
  `run.cancelled` frame), or 200 `idle` when nothing runs.

Refusals are the gateway's own problems in the spec's shape (`errors.py`); the frames go out on
the thread's WebSocket (`routes.py`), from whichever process runs the run.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable

from sqlalchemy.exc import IntegrityError
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response

from ...api.context import (
    admission,
    caller,
    json_body,
    required_user_scope,
    services,
    thread_for,
)
from ...api.door import MARK, mark_run_start
from ...api.errors import HANDLERS
from ...api.runs import gated
from ...protocol.clock import iso_ms, new_id, now_ms
from ...protocol.problems import ApiError, Problem, echo
from ...runs.admission.threads import NewThread, OnThread
from ...store.tables import ThreadRow
from . import input as timbal_input
from .errors import error_body

Handler = Callable[[Request], Awaitable[Response]]


def timbal_errors(handler: Handler) -> Handler:
    """An endpoint whose refusals (and the incident answer of a failure) are in the Timbal
    shape: the app's own handler answers, `errors.error_body` re-shapes it."""

    @functools.wraps(handler)
    async def shaped(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception as exc:
            kind = next(k for k in type(exc).__mro__ if k in HANDLERS)
            return timbal_shaped(await HANDLERS[kind](request, exc))

    if hasattr(handler, MARK):  # a run start: refused at the door in this shape too
        mark_run_start(shaped, timbal_shaped)
    return shaped


def timbal_shaped(problem: Response) -> Response:
    """The Timbal error of a problem+json response, with its headers (`Retry-After`)."""
    body = error_body(problem.status_code, json.loads(bytes(problem.body)),
                      problem.headers.get("retry-after"))
    headers = {k: v for k, v in problem.headers.items()
               if k not in ("content-type", "content-length")}
    return JSONResponse(body, status_code=problem.status_code, headers=headers)


def canonical_thread_id(conn: HTTPConnection) -> None:
    """A UUID thread id in the path in its lower-case form, as threads are created with it."""
    raw = conn.path_params["thread_id"]
    conn.path_params["thread_id"] = timbal_input.thread_id(raw) or raw


def stream_url(request: Request, thread_id: str) -> str:
    scheme = "wss" if request.url.scheme == "https" else "ws"
    return str(request.url.replace(scheme=scheme, path=f"/v1/timbal/threads/{thread_id}/stream",
                                   query=""))


def _thread_answer(request: Request, thread: ThreadRow, status: str) -> JSONResponse:
    return JSONResponse({"threadId": thread.id, "status": status,
                         "createdAt": iso_ms(thread.created_ms),
                         "streamUrl": stream_url(request, thread.id)},
                        status_code=201 if status == "created" else 200)


def _repeat(request: Request, thread: ThreadRow | None, digest: str) -> JSONResponse:
    """A create on a taken id: the same request again is answered as the first was."""
    if thread is None or thread.create_fingerprint != digest:
        raise ApiError(Problem.THREAD_EXISTS, "A thread with this id already exists with a "
                       "different configuration",
                       threadId=echo(request.path_params["thread_id"]))
    return _thread_answer(request, thread, "exists")


async def _create_body(request: Request) -> tuple[timbal_input.ThreadCreate, bytes]:
    """The create request's body (none is `{}`: the spec leaves it to the implementation)."""
    raw = await request.body()
    if not raw.strip():
        return timbal_input.ThreadCreate(), b"{}"
    return await json_body(request, timbal_input.ThreadCreate), raw


@timbal_errors
async def create_thread(request: Request) -> Response:
    thread_id = timbal_input.thread_id(request.path_params["thread_id"])
    if thread_id is None:
        raise ApiError(Problem.VALIDATION_ERROR, "threadId must be a valid UUID",
                       errors={"threadId": "must be a valid UUID"})
    request.path_params["thread_id"] = thread_id
    body, raw = await _create_body(request)
    who = caller(request)
    user_key = required_user_scope(request, body.userKey)
    digest = timbal_input.fingerprint(raw, user_key)
    store = services(request).store
    existing = await store.get_thread(who.project, thread_id)
    if existing is not None:
        return _repeat(request, existing, digest)
    try:
        thread = await admission(request).create_thread(
            who, NewThread(user_key, body.metadata, thread_id=thread_id), asked=body.agent,
            create_fingerprint=digest)
    except IntegrityError:  # created meanwhile by a racing request, or someone else's id
        return _repeat(request, await store.get_thread(who.project, thread_id), digest)
    return _thread_answer(request, thread, "created")


@timbal_errors
@gated
async def send_message(request: Request) -> Response:
    canonical_thread_id(request)
    body: timbal_input.MessageSend = await json_body(request, timbal_input.MessageSend)
    thread = await thread_for(request)
    received = now_ms()
    message_id = new_id()
    spec = timbal_input.run_spec(body, message_id, thread.last_completed_run_id)
    await admission(request).submit(caller(request), OnThread(thread), spec)
    return JSONResponse({"messageId": message_id, "threadId": thread.id,
                         "status": "processing", "receivedAt": iso_ms(received)},
                        status_code=202)


@timbal_errors
async def cancel_thread(request: Request) -> Response:
    canonical_thread_id(request)
    if (await request.body()).strip():
        await json_body(request, timbal_input.CancelRequest)
    thread = await thread_for(request)
    if thread.run_status == "idle" or thread.current_run_id is None:
        return JSONResponse({"threadId": thread.id, "status": "idle"})
    await services(request).runs.cancel(thread.current_run_id)
    return JSONResponse({"threadId": thread.id, "status": "cancelling",
                         "cancelledAt": iso_ms(now_ms()), "runId": thread.current_run_id})
