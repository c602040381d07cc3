"""What the run endpoints of every dialect share: a run's events as SSE, the start gate, a run
found in its thread, and cancelling it. The endpoints themselves are each dialect's
(`gateway/dialects/<name>/routes.py`); what a start may do is decided below HTTP
(`runs/admission/submit.py`).

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

from ..protocol.clock import now_ms
from ..protocol.problems import ApiError, Problem, echo
from ..protocol.run_errors import error_frame, run_error
from ..protocol.tambo import CancelResponse, wire
from ..protocol.translation import Dialect, Positions, queued_prelude
from ..server.sse import BoundedEventSource, Chunks
from ..store.repository import ACTIVE_RUN_STATUSES
from ..store.tables import RunRow, ThreadRow
from .context import services, thread_for
from .door import mark_run_start

log = logging.getLogger(__name__)


# The error a stream ends with when reading the run's log fails in this process: the run itself
# may go on, so it is retryable (reconnect with the cursor). As the run's own errors are
# (`runs/execution.py`), a `timbal.ERROR` frame's fields.
STREAM_FAILED_ERROR = run_error(
    "STREAM_FAILED", "This stream failed on the server; the run may still be going. "
    "Reconnect with Last-Event-ID to continue after the last event.", retryable=True)


def event_stream(request: Request, run: RunRow, after: int = 0,
                 extra_headers: dict[str, str] | None = None, *,
                 dialect: Callable[[], Dialect[Any]],
                 encode: Callable[[Any], str]) -> EventSourceResponse:
    """A run's events in `dialect`, each written with `encode`, from after event `after`."""
    queued = run.status == "queued"
    headers = {"X-Run-Id": run.id, "X-Thread-Id": run.thread_id,
               **({"X-Run-Queued": "true"} if queued else {}),
               **(extra_headers or {})}
    prelude = queued_prelude(dialect(), run.thread_id, run.id, now_ms()) if queued and \
        after == 0 else []
    return sse_response(request, run_events(request, run.id, after, dialect, encode, prelude),
                        headers)


async def run_events(request: Request, run_id: str, after: int,
                     dialect: Callable[[], Dialect[Any]], encode: Callable[[Any], str],
                     prelude: list[Any] | None = None
                     ) -> AsyncIterator[bytes | dict[str, str]]:
    """The SSE messages of a run's events after event `after`, each with its position as id;
    first, a queued run's `prelude` (`queued_prelude`: its start and that it is queued, sent
    without ids, so a reconnect replays the run from its first event).

    The events of each wake-up of the reader (everything the log has beyond it by then) go
    out together (`server/sse.py` `Chunks`: one send per wake-up, or sse-starlette's own
    encoding, one event at a time, under `GATEWAY_STOCK_RUNTIME=sse`)."""
    reader = dialect()
    chunks = Chunks.of(request.scope)
    if prelude:
        for message in chunks.sent([(encode(event), None) for event in prelude]):
            yield message
    positions = Positions(reader, after, started_early=bool(prelude))
    chunk: list[tuple[str, int | None]] = []
    try:
        async with contextlib.aclosing(services(request).runs.batches(run_id)) as batches:
            async for batch in batches:
                for entry in batch:
                    for position, event in positions.of(entry):
                        chunk.append((encode(event), position))
                if chunk:
                    for message in chunks.sent(chunk):
                        yield message
                    chunk.clear()
        for message in chunks.sent([(encode(event), position)
                                    for position, event in positions.lost()]):
            yield message
    except Exception:
        # Headers are sent: the client gets one RUN_ERROR instead of a cut connection (its
        # SDK would report a network error, and the AG-UI verifier a stream without an end).
        # It has no id, so the client's Last-Event-ID stays on the last event it got. The
        # events before the failure that were not sent yet go first.
        log.exception("run %s: its event stream failed", run_id)
        for event in reader.feed(error_frame(STREAM_FAILED_ERROR)):
            chunk.append((encode(reader.stamp(event, now_ms())), None))
        for message in chunks.sent(chunk):
            yield message


def sse_response(request: Request, messages: AsyncIterator[dict[str, str] | bytes],
                 headers: dict[str, str]) -> EventSourceResponse:
    """SSE of `messages`, with the run streams' heartbeat, proxy headers and slow-reader bound."""
    timings = services(request).runs.timings
    return BoundedEventSource(messages, ping=timings.heartbeat_seconds, sep="\n",
                              headers={"Cache-Control": "no-cache", "Connection": "keep-alive",
                                       "X-Accel-Buffering": "no", **headers},
                              send_timeout=timings.slow_reader_seconds)


def gated(handler: Callable[[Request], Awaitable[Response]]
          ) -> Callable[[Request], Awaitable[Response]]:
    """A run-start endpoint, whole (its request parsed, the run admitted by the door and
    launched), inside the process's start gate (`runs/admission/start_gate.py`); the door
    leaves the turn only for slow work of its own (`StartGate.outside`). The response's stream
    is read after the turn ends. Marked as a run start: refused at the door while the process
    is saturated (`api/door.py`)."""

    @functools.wraps(handler)
    async def in_turn(request: Request) -> Response:
        async with services(request).runs.start_gate.turn():
            return await handler(request)

    return mark_run_start(in_turn)


async def run_in_thread(request: Request) -> RunRow:
    return (await thread_and_run(request))[1]


async def thread_and_run(request: Request) -> tuple[ThreadRow, RunRow]:
    """The thread in the path (if the caller may see it) and its run in the path; else 404."""
    # Both reads at once: on a cancel they are the wait before the signal can leave.
    run_id = request.path_params["run_id"]
    thread, run = await asyncio.gather(thread_for(request, scope_optional=True),
                                       services(request).store.get_run(run_id))
    if run is None or run.thread_id != thread.id:
        raise ApiError(Problem.RUN_NOT_FOUND,
                       f"Run {echo(run_id)} not found on thread {thread.id}",
                       threadId=thread.id, runId=echo(run_id))
    return thread, run


def event_cursor(request: Request) -> int:
    """The last event the reader has (`?after=` wins over `Last-Event-ID`); 0: from the start.

    Both are checked when both are sent: a malformed cursor is refused, not silently ignored.
    """
    query, header = request.query_params.get("after"), request.headers.get("last-event-id")
    for cursor in (query, header):
        if cursor and (not (cursor.isascii() and cursor.isdigit()) or len(cursor) > 18):
            raise ApiError(Problem.INVALID_CURSOR,
                           "The event cursor (after / Last-Event-ID) must be a non-negative "
                           "integer", cursor=cursor[:100])
    cursor = query if query is not None else header
    return int(cursor) if cursor else 0


async def cancel_run(request: Request) -> Response:
    """Cancel a run; idempotent. A run that already ended reports how it ended (200); a run in
    another process that has not ended yet after a few seconds is still being cancelled (202)."""
    return await cancelled(request, await run_in_thread(request))


async def cancelled(request: Request, run: RunRow, shown_id: str | None = None) -> Response:
    """Cancel `run` (found by the caller's own rules) and say how it ended, as `cancel_run`;
    `shown_id` is the run's id as the caller knows it (an AG-UI client's `runId`)."""
    final = await services(request).runs.cancel(run.id, run) or run
    active = final.status in ACTIVE_RUN_STATUSES
    body = CancelResponse(runId=shown_id or run.id, status=final.status, cancelRequested=active or None)
    return JSONResponse(wire(body), status_code=202 if active else 200)

