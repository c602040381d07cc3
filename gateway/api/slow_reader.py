"""The slow-reader bound every stream has, whatever its transport.

A reader that stops reading must not hold a run's log (or anything else) in memory for as long
as it likes. Once its socket buffer is full, each send waits; after `slow_reader_seconds` of one
send waiting, the stream is given up and the reader disconnected (it can come back with its
cursor). SSE responses get this from sse-starlette's `send_timeout`; NDJSON responses and the
Timbal WebSocket from here. The disconnection is one log line, never a traceback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

from sse_starlette import EventSourceResponse
from sse_starlette.sse import SendTimeoutError
from starlette.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send

log = logging.getLogger(__name__)


class SlowReader(Exception):
    """The reader read nothing for the bound: its stream is given up."""


async def within(seconds: float, sending: Awaitable[None]) -> None:
    """Await one send, or raise `SlowReader` if it has not gone out after `seconds`."""
    try:
        async with asyncio.timeout(seconds):
            await sending
    except TimeoutError:
        raise SlowReader from None


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

    async def _send_with_timeout(self, send: Send, message: Message) -> None:
        """One event (or heartbeat) sent within `send_timeout`, as sse-starlette does, but with
        asyncio's timeout instead of anyio's cancel scope: the same bound for far fewer calls,
        and this runs once per token (bench/README.md, "Cheaper starts, fourth round")."""
        if self.send_timeout is None:
            await send(message)
            return
        try:
            async with asyncio.timeout(self.send_timeout):
                await send(message)
        except TimeoutError:
            raise SendTimeoutError() from None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            if scope["type"] == "http" and scope["method"] != "HEAD" and \
                    self.data_sender_callable is None:
                await self._streamed(receive, send)
            else:
                await super().__call__(scope, receive, send)
        except SendTimeoutError:
            disconnected(scope.get("path", "?"), self.send_timeout or 0)

    async def _streamed(self, receive: Receive, send: Send) -> None:
        """What sse-starlette's `__call__` does for a GET or POST stream (its body, its pings,
        the server's shutdown and the reader's disconnect, each a task; the first to end ends
        the others; an error in one is the response's), with asyncio's tasks instead of an
        anyio task group: the same work without the group's cancel scopes, about a tenth of a
        run start's CPU (bench/README.md, "Cheaper starts, fifth round")."""
        parts = [self._stream_response(send), self._listen_for_exit_signal_with_grace(),
                 self._listen_for_disconnect(receive)]
        if self._ping_interval > 0:
            parts.append(self._ping(send))
        tasks = [asyncio.create_task(part) for part in parts]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks)
        errors = [task.exception() for task in tasks if not task.cancelled()]
        for error in errors:  # the first error, as the task group raised it
            if error is not None:
                raise error
        if self.background is not None:
            await self.background()
