"""Runs: start (streaming), reconnect, status, list, cancel.

A run response is only a subscriber of the run's log: it flushes SSE headers at once (the SDK's
timeout covers only the wait for headers), then replays the log from the cursor and follows it
live. Closing it never loses anything: `GET /v1/threads/{id}/runs/{runId}` with `Last-Event-ID`
(or `?after=N`) continues after event N, for a running, paused or finished run.

Streams are proxy-safe: `: ping` comments while idle (`GATEWAY_HEARTBEAT_SECONDS`),
`X-Accel-Buffering: no`, `Cache-Control: no-cache`. A reader that stops reading is never
buffered for: once its socket buffer is full, sending waits, and after `slow_reader_seconds` of
that it is disconnected (it can resume with its cursor). The run and other readers never wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..engine import attachments
from ..protocol import timbal
from ..protocol.clock import now_ms
from ..protocol.dialects import tambo
from ..protocol.dialects.base import Dialect, positioned
from ..protocol.problems import ApiError
from ..protocol.tambo import CancelResponse, ResourceBlock, RunList, RunRequest, wire
from ..runs.idempotency import StartedRun
from ..store.repository import ACTIVE_RUN_STATUSES
from ..store.tables import RunRow
from .context import (
    int_param,
    json_body,
    project_of,
    quota_subjects,
    required_user_scope,
    services,
    thread_for,
)
from .render import run_model
from .request_limits import check_run_request
from .slow_reader import BoundedEventSource
from .stored_caps import check_thread_room
from .threads import new_thread

IDEMPOTENCY_KEY_MAX = 255

log = logging.getLogger(__name__)


# The error a stream ends with when reading the run's log fails in this process: the run itself
# may go on, so it is retryable (reconnect with the cursor). As the run's own errors are
# (`runs/execution.py`), a `timbal.ERROR` frame's fields.
STREAM_FAILED_ERROR = {
    "code": "STREAM_FAILED", "category": "server_error", "isRetryable": True,
    "message": "This stream failed on the server; the run may still be going. "
               "Reconnect with Last-Event-ID to continue after the last event."}


def event_stream(request: Request, run: RunRow, after: int = 0,
                 extra_headers: dict[str, str] | None = None,
                 dialect: Callable[[], Dialect[Any]] = tambo.TamboDialect,
                 encode: Callable[[Any], str] = tambo.encode) -> EventSourceResponse:
    """A run's events in `dialect` (the Tambo one unless the endpoint says otherwise)."""
    svc = services(request)

    async def frames() -> AsyncIterator[dict[str, str]]:
        reader = dialect()
        try:
            async with contextlib.aclosing(svc.runs.entries(run.id)) as entries:
                async for position, event in positioned(entries, reader, after):
                    yield {"data": encode(event), "id": str(position)}
        except Exception:
            # Headers are sent: the client gets one RUN_ERROR instead of a cut connection (its
            # SDK would report a network error, and the AG-UI verifier a stream without an end).
            # It has no id, so the client's Last-Event-ID stays on the last event it got.
            log.exception("run %s: its event stream failed", run.id)
            for event in reader.feed(timbal.control(timbal.ERROR, **STREAM_FAILED_ERROR)):
                yield {"data": encode(reader.stamp(event, now_ms()))}

    headers = {"Cache-Control": "no-cache", "Connection": "keep-alive",
               "X-Accel-Buffering": "no", "X-Run-Id": run.id, "X-Thread-Id": run.thread_id,
               **(extra_headers or {})}
    timings = svc.runs.timings
    return BoundedEventSource(frames(), ping=timings.heartbeat_seconds, sep="\n",
                              headers=headers, send_timeout=timings.slow_reader_seconds)


def _started_stream(request: Request, started: StartedRun) -> EventSourceResponse:
    """The response of a run request: the run's events from the first (a retry that attached
    to the run its key started replays it whole)."""
    extra = {"Idempotent-Replayed": "true"} if started.attached else None
    return event_stream(request, started.run, extra_headers=extra)


def idempotency_key(request: Request) -> str | None:
    key = request.headers.get("idempotency-key")
    if key is None:
        return None
    key = key.strip()
    if not key or len(key) > IDEMPOTENCY_KEY_MAX:
        raise ApiError(400, "VALIDATION_ERROR",
                       f"Idempotency-Key must be 1 to {IDEMPOTENCY_KEY_MAX} characters")
    return key


def check_model(request: Request, body: RunRequest) -> None:
    """A run may pick its model only from the allow-list (`GATEWAY_MODELS`): a browser must
    never choose an arbitrary, possibly expensive, model on the operator's key."""
    if body.model is None:
        return
    settings = services(request).settings
    allowed = (settings.model, *settings.models)
    if body.model not in allowed:
        raise ApiError(400, "MODEL_NOT_ALLOWED",
                       f"Model {body.model[:200]!r} is not allowed on this gateway; allowed: "
                       f"{', '.join(allowed)} (set GATEWAY_MODELS to allow more)",
                       allowedModels=list(allowed))


def check_attachments(request: Request, body: RunRequest) -> None:
    """Attachments the model cannot take are refused before anything starts (400/413)."""
    blocks = [b.model_dump(exclude_none=True) for b in body.message.content
              if isinstance(b, ResourceBlock)]
    if not blocks:
        return
    settings = services(request).settings
    try:
        attachments.check(blocks, settings.max_attachment_bytes,
                          attachments.capabilities(body.model or settings.model))
    except attachments.AttachmentError as exc:
        raise ApiError(413 if exc.code == "ATTACHMENT_TOO_LARGE" else 400, exc.code,
                       str(exc)) from None


def check_run(request: Request, body: RunRequest) -> None:
    """Everything about a run request that can be refused before its thread is looked at."""
    check_model(request, body)
    check_attachments(request, body)
    check_run_request(services(request).settings, body)


def gated(handler: Callable[[Request], Awaitable[Response]]
          ) -> Callable[[Request], Awaitable[Response]]:
    """A run-start endpoint, whole (its request parsed and checked, the run admitted and
    launched), inside the process's start gate (`runs/start_gate.py`). The response's stream
    is read after the turn ends."""

    @functools.wraps(handler)
    async def in_turn(request: Request) -> Response:
        async with services(request).runs.start_gate:
            return await handler(request)

    return in_turn


@gated
async def run_new_thread(request: Request) -> Response:
    body: RunRequest = await json_body(request, RunRequest)
    check_run(request, body)
    project = project_of(request)
    init = body.thread
    user_key = required_user_scope(request, init.userKey if init else None, body.userKey,
                                   body.contextKey)
    metadata = body.threadMetadata or (init.metadata if init else None)
    await check_thread_room(services(request).settings, services(request).store, project,
                            user_key)
    thread = new_thread(project, user_key, metadata, init.initialMessages if init else None)
    started = await services(request).runs.start_new_thread(
        project, thread, body, user_key, idempotency_key(request),
        subjects=quota_subjects(request, user_key))
    return _started_stream(request, started)


@gated
async def run_thread(request: Request) -> Response:
    body: RunRequest = await json_body(request, RunRequest)
    check_run(request, body)
    thread = await thread_for(request, body.userKey, body.contextKey)
    started = await services(request).runs.start(thread.project_id, thread, body,
                                                 idempotency_key(request),
                                                 subjects=quota_subjects(request, thread.user_key))
    return _started_stream(request, started)


async def run_in_thread(request: Request) -> RunRow:
    # Both reads at once: on a cancel they are the wait before the signal can leave.
    run_id = request.path_params["run_id"]
    thread, run = await asyncio.gather(thread_for(request, scope_optional=True),
                                       services(request).store.get_run(run_id))
    if run is None or run.thread_id != thread.id:
        raise ApiError(404, "RUN_NOT_FOUND", f"Run {run_id} not found on thread {thread.id}",
                       threadId=thread.id, runId=run_id)
    return run


async def get_run(request: Request) -> Response:
    """Reconnect (SSE from a cursor) or, with `Accept: application/json`, the run's status."""
    run = await run_in_thread(request)
    accept = request.headers.get("accept", "")
    if "application/json" in accept and "text/event-stream" not in accept:
        return JSONResponse(wire(run_model(run)))
    return event_stream(request, run, event_cursor(request))


def event_cursor(request: Request) -> int:
    """The last event the reader has (`?after=` wins over `Last-Event-ID`); 0: from the start.

    Both are checked when both are sent: a malformed cursor is refused, not silently ignored.
    """
    query, header = request.query_params.get("after"), request.headers.get("last-event-id")
    for cursor in (query, header):
        if cursor and (not (cursor.isascii() and cursor.isdigit()) or len(cursor) > 18):
            raise ApiError(400, "INVALID_CURSOR",
                           "The event cursor (after / Last-Event-ID) must be a non-negative "
                           "integer", cursor=cursor[:100])
    cursor = query if query is not None else header
    return int(cursor) if cursor else 0


async def list_runs(request: Request) -> Response:
    thread = await thread_for(request)
    limit = int_param(request, "limit", 20, 1, 100)
    page = await services(request).store.list_runs(thread.id, limit,
                                                   request.query_params.get("cursor"))
    return JSONResponse(wire(RunList(runs=[run_model(r) for r in page.rows],
                                     hasMore=page.has_more, nextCursor=page.next_cursor)))


async def cancel_run(request: Request) -> Response:
    """Cancel a run; idempotent. A run that already ended reports how it ended (200); a run in
    another process that has not ended yet after a few seconds is still being cancelled (202)."""
    run = await run_in_thread(request)
    final = await services(request).runs.cancel(run.id, run) or run
    active = final.status in ACTIVE_RUN_STATUSES
    body = CancelResponse(runId=run.id, status=final.status, cancelRequested=active or None)
    return JSONResponse(wire(body), status_code=202 if active else 200)


routes = [
    Route("/v1/threads/runs", run_new_thread, methods=["POST"]),
    Route("/v1/threads/{thread_id}/runs", run_thread, methods=["POST"]),
    Route("/v1/threads/{thread_id}/runs", list_runs, methods=["GET"]),
    Route("/v1/threads/{thread_id}/runs/{run_id}", get_run, methods=["GET"]),
    Route("/v1/threads/{thread_id}/runs/{run_id}", cancel_run, methods=["DELETE"]),
]
