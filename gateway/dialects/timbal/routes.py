"""Timbal views of threads and runs: NDJSON over HTTP, and a WebSocket per the Timbal HTTP layer.
The write path (create a thread, send a message, cancel) is `routes_write.py`.

- `GET /v1/timbal/threads/{id}/runs/{runId}`: the run's log, one frame per line
  (`application/x-ndjson`), live until the run ends; `?after=N` skips the first N frames.
- `GET /v1/timbal/threads/{id}` (`?since=`): the thread's completed messages as set frames, then,
  if a run is active, that run's frames live until it ends.
- `WS /v1/timbal/threads/{id}/stream`: the frames of every run on the thread as it happens, one
  frame per text message. The client may send `{"c":"sync","since":...}` (the legacy
  `{"request":"sync"}` too): the completed messages with `t >= since` come back as set frames,
  closed by our `{"c":"synced","count":N}`; `{"c":"unsub","s":...}` stops the live frames until
  the next `sync`. A malformed request gets an `error` control frame; unparseable data closes
  the socket with 1003, a frame over `GATEWAY_MAX_WEBSOCKET_FRAME_BYTES` with 1009 (unread), a thread that is not there (after waiting for it to be created,
  `GATEWAY_TIMBAL_THREAD_WAIT_SECONDS`, 30 s) with 4004, a deleted thread with 4009, an
  internal failure with 1011. Every socket on a thread gets every run's frames, the user's
  message first, whichever process runs it (the run's log comes through the backend's feed).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from starlette.requests import HTTPConnection, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from ...api.context import caller, may_see, services, thread_for, user_scope
from ...api.json_body import scan_json
from ...api.runs import event_cursor, thread_and_run
from ...config import Settings
from ...protocol import timbal
from ...protocol.problems import ApiError, Problem
from ...protocol.translation import positioned
from ...server.sse import BoundedStreamingResponse, SlowReader, disconnected, within
from ...services import Services
from ...store.tables import ThreadRow
from . import routes_write as writes
from . import translate as view
from .routes_write import canonical_thread_id

log = logging.getLogger(__name__)

NDJSON = "application/x-ndjson"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
CLOSE_INVALID_DATA, CLOSE_POLICY, CLOSE_TOO_BIG, CLOSE_ERROR = 1003, 1008, 1009, 1011
# From this size a client's frame is scanned and parsed on a worker thread, not the loop.
FRAME_OFF_LOOP_CHARS = 16 * 1024
CLOSE_NOT_FOUND, CLOSE_ENDED = 4004, 4009
# A sync reads the thread's history: a client may ask for one this often, at most.
SYNC_INTERVAL_SECONDS = 1.0


def _since(request: Request) -> int | None:
    try:
        return view.since_ms(request.query_params.get("since"))
    except ValueError:
        raise ApiError(Problem.VALIDATION_ERROR, "since must be an ISO-8601 time with a zone, "
                       "e.g. 2025-01-15T14:30:00.000Z", errors={"since": "not an ISO-8601 "
                                                                           "time"}) from None


def hidden_owner(request: HTTPConnection, thread: ThreadRow) -> str | None:
    """The thread's user scope, when the caller named none (it holds only the thread's id):
    the views leave it out of the frames (`view.without_owner`). A caller that named a scope
    and sees the thread is its owner, or the thread has none."""
    return thread.user_key if user_scope(request) is None else None


def _lines(request: Request, frames: AsyncGenerator[timbal.Frame, None],
           owner: str | None) -> StreamingResponse:
    async def body() -> AsyncIterator[str]:
        async with contextlib.aclosing(frames) as source:
            async for frame in source:
                yield view.encode(view.without_owner(frame, owner)) + "\n"

    return BoundedStreamingResponse(
        body(), media_type=NDJSON, headers=HEADERS,
        slow_reader_seconds=services(request).runs.timings.slow_reader_seconds)


async def run_frames(request: Request) -> Response:
    thread, run = await thread_and_run(request)
    after = event_cursor(request)
    svc = services(request)

    async def frames() -> AsyncGenerator[timbal.Frame, None]:
        async with contextlib.aclosing(svc.runs.entries(run.id)) as entries:
            async for _, frame in positioned(entries, view.TimbalDialect(), after):
                yield frame

    return _lines(request, frames(), hidden_owner(request, thread))


def _current_run(thread: ThreadRow) -> str | None:
    return thread.current_run_id if thread.run_status != "idle" else None


async def thread_frames(request: Request) -> Response:
    thread = await thread_for(request, scope_optional=True)
    since = _since(request)
    svc = services(request)
    current = _current_run(thread)
    rows = await svc.store.history(thread.id)

    async def frames() -> AsyncGenerator[timbal.Frame, None]:
        for frame in view.history(rows, since, skip_run=current):
            yield frame
        if current is not None:
            async with contextlib.aclosing(svc.runs.entries(current)) as entries:
                async for entry in entries:
                    if view.live_since(entry.frame, entry.ts, since):
                        yield entry.frame

    return _lines(request, frames(), hidden_owner(request, thread))


# -- the WebSocket ------------------------------------------------------------------------------


class ThreadSocket:
    """One client's socket on one thread: live frames of its runs, and sync answers."""

    def __init__(self, ws: WebSocket, svc: Services, project: str, thread: ThreadRow,
                 from_start: bool = False, owner: str | None = None) -> None:
        self.ws, self.svc, self.project, self.thread = ws, svc, project, thread
        self.owner = owner  # the user scope the frames leave out (`hidden_owner`)
        # Connected before the thread existed: its runs so far are new to the client too (one
        # may have ended before the wait saw the thread).
        self.from_start = from_start
        self.subscribed = True
        self._send_lock = asyncio.Lock()
        self._next_sync = 0.0  # loop time before which another sync is refused

    async def send(self, frame: view.Line) -> None:
        """Send one frame; `SlowReader` if the client has not taken it within the bound."""
        async with self._send_lock:
            await within(self.svc.runs.timings.slow_reader_seconds,
                         self.ws.send_text(view.encode(view.without_owner(frame, self.owner))))

    async def serve(self) -> None:
        """Follow the runs and answer the client's requests until either ends; a client that
        stops reading is disconnected (`slow_reader`)."""
        tasks = {asyncio.create_task(self.follow_runs()), asyncio.create_task(self.requests())}
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if any(not t.cancelled() and isinstance(t.exception(), SlowReader) for t in done):
            disconnected(self.ws.url.path, self.svc.runs.timings.slow_reader_seconds)

    async def requests(self) -> None:
        with contextlib.suppress(WebSocketDisconnect):
            while True:
                text = await self.ws.receive_text()
                if not await self.handle(text):
                    return

    async def handle(self, text: str) -> bool:
        """Answer one client frame; False once the socket is closed. A frame over
        `GATEWAY_MAX_WEBSOCKET_FRAME_BYTES` closes the socket (1009) unread (the server
        refuses one before it arrives whole: this is for a server that does not); a large one
        is scanned and parsed on a worker thread."""
        limit = self.svc.settings.max_websocket_frame_bytes
        if len(text) > limit or len(text.encode()) > limit:
            await self.ws.close(CLOSE_TOO_BIG, f"a frame may take {limit} bytes at most")
            return False
        depth = self.svc.settings.max_json_depth
        frame, refusal = (parse_frame(text, depth) if len(text) < FRAME_OFF_LOOP_CHARS
                          else await asyncio.to_thread(parse_frame, text, depth))
        if refusal is not None:
            await self.ws.close(CLOSE_INVALID_DATA, refusal)
            return False
        assert frame is not None
        name = frame.get("c") if isinstance(frame.get("c"), str) else (
            "sync" if frame.get("request") == "sync" else None)
        if name == "sync":
            try:
                since = view.since_ms(frame.get("since"))
            except (TypeError, ValueError):
                await self.send(_error("invalid_request", "since must be an ISO-8601 time "
                                                          "with a zone"))
                return True
            self.subscribed = True
            loop = asyncio.get_running_loop()
            if loop.time() < self._next_sync:
                await self.send(_error("rate_limited", "one sync per "
                                       f"{SYNC_INTERVAL_SECONDS:g} s; ask again later"))
                return True
            self._next_sync = loop.time() + SYNC_INTERVAL_SECONDS
            await self.sync(since)
        elif name == "unsub":
            if not isinstance(frame.get("s"), str):
                await self.send(_error("invalid_request", "unsub needs the stream id `s`"))
            else:
                self.subscribed = False
        elif "i" in frame:
            await self.send(_error("invalid_request", "frames are sent by the server: send a "
                                   "message with POST /v1/timbal/threads/{threadId}/messages"))
        return True  # other control frames are ignored, as Timbal requires

    async def sync(self, since: int | None) -> None:
        rows = await self.svc.store.history(self.thread.id)
        count = 0
        for frame in view.history(rows, since):
            await self.send(frame)
            count += 1
        await self.send(view.synced(count, since))

    async def follow_runs(self) -> None:
        """Send the frames of each run on the thread, from its first frame, as it happens."""
        thread = self.thread
        seen = set() if self.from_start else {thread.last_completed_run_id}
        try:
            while True:
                run_id = _current_run(thread) or thread.last_completed_run_id
                if run_id is not None and run_id not in seen:
                    seen.add(run_id)
                    async with contextlib.aclosing(self.svc.runs.entries(run_id)) as entries:
                        async for entry in entries:
                            if self.subscribed:
                                await self.send(entry.frame)
                else:
                    await asyncio.sleep(self.svc.runs.timings.timbal_poll_seconds)
                fresh = await self.svc.store.get_thread(self.project, thread.id)
                if fresh is None:
                    await self.ws.close(CLOSE_ENDED, "the thread was deleted")
                    return
                thread = fresh
        except (WebSocketDisconnect, asyncio.CancelledError, SlowReader):
            raise
        except Exception:
            log.exception("timbal socket on thread %s failed", thread.id)
            with contextlib.suppress(Exception):
                await self.ws.close(CLOSE_ERROR, "internal error")


def parse_frame(text: str, depth_limit: int) -> tuple[dict[str, Any] | None, str | None]:
    """(the client's frame, None), or (None, why the socket closes): checked before it is
    parsed, as a request body is (`api.json_body`)."""
    scan = scan_json(text.encode(), depth_limit)
    if scan.depth > depth_limit:
        return None, "the frame nests too deep"
    if scan.number_problem is not None:
        return None, "the frame holds a number JSON cannot carry"
    if scan.nul:
        return None, "the frame holds a NUL character"
    try:
        frame = json.loads(text)
    except ValueError:
        frame = None
    if not isinstance(frame, dict):
        return None, "a frame must be a JSON object"
    return frame, None


def _error(code: str, message: str) -> view.RequestErrorFrame:
    return {"c": timbal.ERROR, "code": code, "message": message}


async def thread_socket(ws: WebSocket) -> None:
    svc = services(ws)
    try:
        who = caller(ws)
        user_key = user_scope(ws)
    except ApiError:
        await ws.close(CLOSE_POLICY)  # before accepting: the handshake is refused (403)
        return
    holder = who.key_id or f"project:{who.project}"  # development mode: the one project
    # The user's share of the key's sockets: its user scope, else the client's address.
    user = f"{holder}\0" + (user_key or f"address:{ws.client.host if ws.client else ''}")
    limit, user_limit = svc.settings.key_websockets, svc.settings.user_websockets
    if not origin_allowed(svc.settings, ws.headers.get("origin")) or (
            limit and svc.sockets[holder] >= limit) or (
            user_limit and svc.sockets[user] >= user_limit):
        await ws.close(CLOSE_POLICY)
        return
    svc.sockets[holder] += 1
    svc.sockets[user] += 1
    try:
        await ws.accept()
        canonical_thread_id(ws)
        thread_id = ws.path_params["thread_id"]
        thread, waited = await _wait_for_thread(ws, svc, who.project, thread_id, user_key)
        if thread is None:
            await ws.close(CLOSE_NOT_FOUND, "thread not found")
            return
        await ThreadSocket(ws, svc, who.project, thread, from_start=waited,
                           owner=hidden_owner(ws, thread)).serve()
    finally:
        for slot in (holder, user):
            svc.sockets[slot] -= 1
            if not svc.sockets[slot]:
                del svc.sockets[slot]


def origin_allowed(settings: Settings, origin: str | None) -> bool:
    """A WebSocket handshake's `Origin` against `GATEWAY_CORS_ORIGINS`: CORS does not apply to
    WebSockets, so the browser lets any page open one and leaves the check to the server.
    Clients that are not browsers send none. (Development mode allows loopback origins only,
    before any route: `gateway.auth.development`, asked by the front.)"""
    allowed = settings.cors_origins
    return origin is None or "*" in allowed or origin in allowed


async def _wait_for_thread(ws: WebSocket, svc: Services, project: str, thread_id: str,
                           user_key: str | None) -> tuple[ThreadRow | None, bool]:
    """The thread once it exists (None: not within the wait, or not the caller's), and
    whether it had to be waited for."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + svc.runs.timings.timbal_thread_wait_seconds
    waited = False
    while True:
        thread = await svc.store.get_thread(project, thread_id)
        if thread is not None:
            visible = may_see(ws, thread, user_key, scope_optional=True)
            return (thread if visible else None), waited
        if loop.time() >= deadline:
            return None, waited
        waited = True
        await asyncio.sleep(0.5)


routes: list[Any] = [
    Route("/v1/timbal/threads/{thread_id}", thread_frames, methods=["GET"]),
    Route("/v1/timbal/threads/{thread_id}", writes.create_thread, methods=["POST"]),
    Route("/v1/timbal/threads/{thread_id}/messages", writes.send_message, methods=["POST"]),
    Route("/v1/timbal/threads/{thread_id}/cancel", writes.cancel_thread, methods=["POST"]),
    Route("/v1/timbal/threads/{thread_id}/runs/{run_id}", run_frames, methods=["GET"]),
    WebSocketRoute("/v1/timbal/threads/{thread_id}/stream", thread_socket),
]
