"""The slow-reader bound every stream has, whatever its transport.

A reader that stops reading must not hold a run's log (or anything else) in memory for as long
as it likes. Once its socket buffer is full, each send waits; after `slow_reader_seconds` of one
send waiting, the stream is given up and the reader disconnected (it can come back with its
cursor). SSE responses get this from sse-starlette's `send_timeout`; NDJSON responses and the
Timbal WebSocket from here. The disconnection is one log line, never a traceback. A send is
timed only once it waits (`bounded`): most go out at once.

The SSE response (`BoundedEventSource`) is sse-starlette's, with its parts run by the gateway:
the body is the response's one task; the pings, the reader's disconnect and the server's
shutdown are waited for in the request's own task (`_watch`).
"""

from __future__ import annotations

import asyncio
import logging
import types
from collections.abc import Awaitable, Coroutine, Generator
from datetime import datetime, timezone
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from sse_starlette.event import ensure_bytes
from sse_starlette.sse import (
    AppStatus,
    SendTimeoutError,
    _ensure_watcher_started_on_this_loop,
    _get_shutdown_state,
)
from starlette.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send

log = logging.getLogger(__name__)


class SlowReader(Exception):
    """The reader read nothing for the bound: its stream is given up."""


async def within(seconds: float, sending: Awaitable[None]) -> None:
    """Await one send, or raise `SlowReader` if it has not gone out after `seconds`."""
    try:
        await bounded(seconds, sending)
    except TimeoutError:
        raise SlowReader from None


async def bounded(seconds: float, sending: Awaitable[None]) -> None:
    """Await one send, or raise `TimeoutError` if it has waited `seconds`.

    Most sends never wait: the server writes the bytes to its transport and returns, and only
    a full socket buffer (a reader that stopped reading) makes it wait for the drain. So the
    send is started here, and timed only if it has to wait: a send that goes out at once costs
    no timer (an `asyncio.timeout` per send was a scope and a timer handle, made and cancelled,
    for every token and every start's event; bench/README.md, "The loop's work per start, ninth
    round"). What it waits for, and the rest of it, is awaited within the bound as before."""
    if not isinstance(sending, types.CoroutineType):  # an awaitable of another kind
        async with asyncio.timeout(seconds):
            await sending
        return
    try:
        waiting = sending.send(None)
    except StopIteration:
        return
    except BaseException:
        sending.close()
        raise
    async with asyncio.timeout(seconds):
        await _rest(sending, waiting)


@types.coroutine
def _rest(coro: Coroutine[Any, Any, None], waiting: Any) -> Generator[Any, Any, None]:
    """The rest of `coro`, started elsewhere and now waiting for `waiting`: each value or
    error the awaiting task is resumed with is passed on, as `await` would."""
    while True:
        try:
            resumed = yield waiting
        except BaseException as error:  # noqa: BLE001 - a cancellation (the bound) or an error
            try:
                waiting = coro.throw(error)
            except StopIteration:
                return
        else:
            try:
                waiting = coro.send(resumed)
            except StopIteration:
                return


def disconnected(path: str, seconds: float) -> None:
    """The one line a slow reader's disconnection is logged as."""
    log.info("a reader of %s read nothing for %g s: disconnected", path, seconds)


class BoundedStreamingResponse(StreamingResponse):
    """A `StreamingResponse` whose reader is disconnected after `seconds` without reading."""

    def __init__(self, content: Any, *, slow_reader_seconds: float, **options: Any) -> None:
        super().__init__(content, **options)
        self.slow_reader_seconds = slow_reader_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def bounded(message: Message) -> None:
            await within(self.slow_reader_seconds, send(message))

        try:
            await super().__call__(scope, receive, bounded)
        except SlowReader:
            disconnected(scope.get("path", "?"), self.slow_reader_seconds)
            closing = getattr(self.body_iterator, "aclose", None)
            if closing is not None:
                await closing()  # the run's log subscription ends now, not at GC


class BoundedEventSource(EventSourceResponse):
    """sse-starlette's response (`send_timeout` is its slow-reader bound), with the
    disconnection logged as one line instead of the timeout's traceback."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        # The lock that keeps a ping from going after the stream's last message. anyio's
        # takes a cancel-shielded checkpoint (a scope and one more turn of the loop) on every
        # uncontended acquire, which each stream's end is; asyncio's takes it at once.
        self._send_lock = asyncio.Lock()  # type: ignore[assignment]

    async def _send_with_timeout(self, send: Send, message: Message) -> None:
        """One event (or heartbeat) sent within `send_timeout`, as sse-starlette does, but
        timed only if it waits (`bounded`) and with asyncio's timeout instead of anyio's cancel
        scope: the same bound for far fewer calls, and this runs once per token
        (bench/README.md, "Cheaper starts, fourth round")."""
        if self.send_timeout is None:
            await send(message)
            return
        try:
            await bounded(self.send_timeout, send(message))
        except TimeoutError:
            raise SendTimeoutError() from None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            if scope["type"] == "http" and scope["method"] != "HEAD" and \
                    self.data_sender_callable is None and self._shutdown_event is None and \
                    not self._shutdown_grace_period:
                await self._streamed(receive, send)
            else:
                await super().__call__(scope, receive, send)
        except SendTimeoutError:
            disconnected(scope.get("path", "?"), self.send_timeout or 0)

    async def _streamed(self, receive: Receive, send: Send) -> None:
        """What sse-starlette's `__call__` does for a GET or POST stream (its body, its pings,
        the server's shutdown and the reader's disconnect; the first to end ends the others; an
        error in one is the response's), with one task instead of four: the body in its own
        task, everything else waited for here, in the request's (`_watch`). sse-starlette
        runs each part as a task of an anyio task group; as four asyncio tasks they were still
        about 170 calls and several loop turns of a run start (bench/README.md, "The loop's
        work per start, ninth round")."""
        body = asyncio.create_task(self._stream_response(send))
        try:
            await self._watch(receive, send, body)
        finally:
            if not body.done():
                body.cancel()
                await asyncio.wait((body,))
            error = None if body.cancelled() else body.exception()
            if error is not None:  # the body's error first, as the task group raised it
                raise error
        if self.background is not None:
            await self.background()

    async def _watch(self, receive: Receive, send: Send, body: asyncio.Task[None]) -> None:
        """Wait, in the request's own task, for the body's end, the reader's disconnect
        (`http.disconnect`) or the server's shutdown (sse-starlette's watcher, as
        `_listen_for_exit_signal`), sending a ping every `ping` seconds meanwhile (as `_ping`).
        The body's end and the shutdown end the wait on `receive()` through the timeout that
        also times the pings: one timer, no task."""
        if AppStatus.should_exit:
            return
        ending = _Ending()
        body.add_done_callback(ending.end)
        _ensure_watcher_started_on_this_loop()
        watched = _get_shutdown_state().events
        watched.add(ending)  # type: ignore[arg-type]  # the watcher only calls its `set()`
        loop = asyncio.get_running_loop()
        interval = self._ping_interval or None
        try:
            while self.active and not ending.ended and not AppStatus.should_exit:
                try:
                    async with asyncio.timeout_at(
                            None if interval is None else loop.time() + interval) as ending.scope:
                        message = await receive()
                except TimeoutError:
                    if not ending.ended:
                        await self._send_ping(send)
                    continue
                finally:
                    ending.scope = None
                if message["type"] == "http.disconnect":
                    self.active = False
                    if self.client_close_handler_callable:
                        await self.client_close_handler_callable(message)
                    return
        finally:
            body.remove_done_callback(ending.end)
            watched.discard(ending)

    async def _send_ping(self, send: Send) -> None:
        """One ping, as sse-starlette's `_ping` sends it: a comment, under the send lock, with
        the slow-reader bound, unless the stream has ended."""
        ping = self.ping_message_factory() if self.ping_message_factory else \
            ServerSentEvent(comment=f"ping - {datetime.now(timezone.utc)}", sep=self.sep)
        async with self._send_lock:
            if self.active:
                await self._send_with_timeout(send, {
                    "type": "http.response.body", "body": ensure_bytes(ping, self.sep),
                    "more_body": True})


class _Ending:
    """What ends a response's `_watch`: the body's end (a done callback) or the server's
    shutdown (registered with sse-starlette's watcher as its events are: it calls `set()`).
    Either expires the timeout the watch is waiting in, at once."""

    __slots__ = ("ended", "scope")

    def __init__(self) -> None:
        self.ended = False
        self.scope: asyncio.Timeout | None = None

    def end(self, _: object = None) -> None:
        self.ended = True
        if self.scope is not None and not self.scope.expired():
            self.scope.reschedule(0)

    set = end
