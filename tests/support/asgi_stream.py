"""An httpx transport to an ASGI app in the same event loop that streams, as a socket would.

`httpx.ASGITransport` (httpx 0.28) collects the whole response body before it returns, so a
test could never read the first events of a live run, leave, and reconnect: an SSE response
would only come back once the run had ended. This transport returns as soon as the app sends
its response start; the body is read as the app sends it, and closing the response tells the
app the client left (`http.disconnect`), as a browser dropping the connection does.

An exception the app raises after it has answered is logged (as uvicorn does), not raised into
the test: the client sees what a client of the real server would see.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import httpx
from starlette.types import ASGIApp, Message

log = logging.getLogger("gateway.tests.asgi")
# How long a closed response waits for the app to notice the client left before cancelling it.
CLOSE_WAIT_SECONDS = 5.0


class _Body(httpx.AsyncByteStream):
    def __init__(self, chunks: asyncio.Queue[bytes | None], task: asyncio.Task[None],
                 disconnected: asyncio.Event) -> None:
        self.chunks, self.task, self.disconnected = chunks, task, disconnected

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while (chunk := await self.chunks.get()) is not None:
            yield chunk

    async def aclose(self) -> None:
        self.disconnected.set()
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(self.task), CLOSE_WAIT_SECONDS)
        self.task.cancel()


class StreamingASGITransport(httpx.AsyncBaseTransport):
    """Requests to `app`, called in the current event loop; the response body streams."""

    def __init__(self, app: ASGIApp, client: tuple[str, int] = ("127.0.0.1", 50000)) -> None:
        self.app, self.client = app, client

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": request.method, "scheme": request.url.scheme,
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "path": request.url.path, "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query, "root_path": "",
            "server": (request.url.host, request.url.port or 80), "client": self.client,
        }
        body = await request.aread()
        loop = asyncio.get_running_loop()
        started: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] = loop.create_future()
        chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        disconnected, body_sent = asyncio.Event(), False

        async def receive() -> Message:
            nonlocal body_sent
            if not body_sent:
                body_sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await disconnected.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if disconnected.is_set():
                return  # the client left: what it would have received goes nowhere
            if message["type"] == "http.response.start":
                started.set_result((message["status"], list(message.get("headers", []))))
            elif message["type"] == "http.response.body":
                if message.get("body") and request.method != "HEAD":
                    chunks.put_nowait(message["body"])
                if not message.get("more_body", False):
                    chunks.put_nowait(None)

        async def call() -> None:
            try:
                await self.app(scope, receive, send)
            except Exception as error:
                log.exception("Exception in ASGI application")
                if not started.done():
                    started.set_exception(error)
            finally:
                if not started.done():
                    started.set_exception(RuntimeError("the app returned without answering"))
                chunks.put_nowait(None)

        task = asyncio.create_task(call(), name=f"asgi {request.method} {request.url.path}")
        try:
            status, headers = await started
        except BaseException:
            task.cancel()
            raise
        return httpx.Response(status, headers=headers, request=request,
                              stream=_Body(chunks, task, disconnected))

