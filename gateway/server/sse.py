"""The slow-reader bound every stream has, whatever its transport.

A reader that stops reading must not hold a run's log (or anything else) in memory for as long
as it likes. Once its socket buffer is full, each send waits; after `slow_reader_seconds` of one
send waiting, the stream is given up and the reader disconnected (it can come back with its
cursor). SSE responses get this from sse-starlette's `send_timeout`; NDJSON responses and the
Timbal WebSocket from here. The disconnection is one log line, never a traceback. A send is
timed only once it waits (`bounded`): most go out at once.

The SSE response runs on sse-starlette's private methods (listed with why in
tests/unit/test_private_apis.py; docs/decisions/0005 to 0007); with `GATEWAY_STOCK_RUNTIME`
naming `sse`, the front marks the request (`STOCK_KEY`) and sse-starlette's own path runs.
"""
from __future__ import annotations

import asyncio
import logging
import re
import types
from collections.abc import Awaitable, Coroutine, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sse_starlette import EventSourceResponse
from sse_starlette.sse import SendTimeoutError
from starlette.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send

log = logging.getLogger(__name__)
# Set in a request's scope (by the front) when `GATEWAY_STOCK_RUNTIME` names `sse`.
STOCK_KEY = "gateway.stock_sse"


class SlowReader(Exception):
    """The reader read nothing for the bound: its stream is given up."""


async def within(seconds: float, sending: Awaitable[None], *, stock: bool = False) -> None:
    """Await one send, or raise `SlowReader` if it has not gone out after `seconds` (`stock`:
    every send inside its own `asyncio.timeout`, as a plain bound would be)."""
    try:
        if stock:
            async with asyncio.timeout(seconds):
                await sending
        else:
            await bounded(seconds, sending)
    except TimeoutError:
        raise SlowReader from None


async def bounded(seconds: float, sending: Awaitable[None]) -> None:
    """Await one send, or raise `TimeoutError` if it has waited `seconds`.

    Most sends never wait: the server writes the bytes to its transport and returns, and only
    a full socket buffer (a reader that stopped reading) makes it wait for the drain. So the
    send is started here, and timed only if it has to wait: a send that goes out at once costs
    no timer (docs/decisions/0006-send-timed-only-if-it-waits.md). What it waits for, and the
    rest of it, is awaited within the bound as before."""
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
        stock = bool(scope.get(STOCK_KEY))

        async def bounded(message: Message) -> None:
            await within(self.slow_reader_seconds, send(message), stock=stock)

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

    stock = False  # sse-starlette's own path for this response (`STOCK_KEY`)

    async def _send_with_timeout(self, send: Send, message: Message) -> None:
        """One event (or heartbeat) sent within `send_timeout`, as sse-starlette does, but
        timed only if it waits (`bounded`) and with asyncio's timeout instead of anyio's cancel
        scope: the same bound, and this runs once per token
        (docs/decisions/0006-send-timed-only-if-it-waits.md)."""
        if self.stock:
            await super()._send_with_timeout(send, message)
            return
        if self.send_timeout is None:
            await send(message)
            return
        try:
            await bounded(self.send_timeout, send(message))
        except TimeoutError:
            raise SendTimeoutError() from None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.stock = bool(scope.get(STOCK_KEY))
        try:
            if not self.stock and scope["type"] == "http" and scope["method"] != "HEAD" and \
                    self.data_sender_callable is None:
                # The lock that keeps a ping from going after the stream's last message:
                # asyncio's takes an uncontended acquire at once, anyio's takes a
                # cancel-shielded checkpoint (docs/decisions/0007-asyncio-send-lock.md).
                self._send_lock = asyncio.Lock()  # type: ignore[assignment]
                await self._streamed(receive, send)
            else:
                await super().__call__(scope, receive, send)
        except SendTimeoutError:
            disconnected(scope.get("path", "?"), self.send_timeout or 0)

    async def _streamed(self, receive: Receive, send: Send) -> None:
        """What sse-starlette's `__call__` does for a GET or POST stream (its body, its pings,
        the server's shutdown and the reader's disconnect, each a task; the first to end ends
        the others; an error in one is the response's), with asyncio's tasks instead of an
        anyio task group: the same work without the group's cancel scopes
        (docs/decisions/0005-sse-response-tasks.md)."""
        parts = [self._stream_response(send), self._listen_for_exit_signal_with_grace(),
                 self._listen_for_disconnect(receive)]
        if self.ping_interval > 0:
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


# What sse-starlette splits an event's data at (each line its own `data:` field).
LINE_BREAK = re.compile(r"\r\n|\r|\n")


def sse_event(data: str, position: int | None = None) -> str:
    """One SSE event as sse-starlette encodes `{"data": data, "id": str(position)}` with the
    run streams' separator (LF): the `id:` line (none without a position), a `data:` line per
    line of `data`, a blank line.

    Not the library's `ServerSentEvent(...).encode()` because this is once per streamed token,
    and that builds an object and checks every field
    (docs/decisions/0008-sse-events-encoded-per-wake-up.md). tests/unit/test_sse_event.py
    holds the two to the same bytes."""
    head = f"id: {position}\n" if position is not None else ""
    if "\n" not in data and "\r" not in data:  # JSON as the dialects encode it
        return f"{head}data: {data}\n\n"
    return head + "".join(f"data: {line}\n" for line in LINE_BREAK.split(data)) + "\n"


@dataclass(frozen=True, slots=True)
class Chunks:
    """How a stream's events, each its data and its position (or none), go out: all the
    events of one wake-up as one chunk of bytes, encoded here (decision record 0008), or, with
    `GATEWAY_STOCK_RUNTIME` naming `sse`, one message each for sse-starlette to encode."""

    stock: bool

    @classmethod
    def of(cls, scope: Scope) -> Chunks:
        """The way the front chose for this request (`STOCK_KEY`)."""
        return cls(bool(scope.get(STOCK_KEY)))

    def sent(self, events: Sequence[tuple[str, int | None]]) -> Iterator[bytes | dict[str, str]]:
        """What the response's body iterator yields for `events` (nothing for none)."""
        if not events:
            return
        if self.stock:
            for data, position in events:
                yield {"data": data} if position is None else {"data": data, "id": str(position)}
        else:
            yield "".join(sse_event(data, position) for data, position in events).encode()
