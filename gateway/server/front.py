"""The front: everything a request meets before its route, as one pure-ASGI layer.

In the order the separate middlewares it replaced ran, each check able to refuse:

1. the request id (`observability/logs.py`), and the HTTP metrics (`observability/http_metrics.py`),
   which see every answer below, refusals and the 500 of an unexpected error included;
2. the guard: development mode's loopback-only check (`auth/development.py`), before CORS, so a
   foreign origin's preflight is refused, not answered;
3. CORS (starlette's `CORSMiddleware`, its preflight answer and its response headers), only for
   a request that sends an `Origin`: without one it does nothing;
4. the door that refuses a new run while the process is saturated (`api/door.py`), before the
   body is read or the caller authenticated;
5. the body limit (`server/body_limit.py`) and the managed key's lookup (`auth/keyring.py`);
6. the app's exception handlers around the router (what starlette's `ServerErrorMiddleware` and
   `ExceptionMiddleware` did): a handled error's problem+json, an unexpected one's 500 (with the
   CORS headers and the request id, since it leaves through this same `send`), re-raised for the
   server to log.

Why one layer: each of those middlewares wrapped `send` in a coroutine of its own, and a run's
stream calls `send` once per event, so every token crossed six nested coroutines before the
server's `send`. Here one plain function (`Exchange.send`) hands a body message straight to the
server's `send`; only the response's start takes the slow way (its headers, the metrics).
WebSocket handshakes get the guard and the key lookup; their errors go through starlette's
`ExceptionMiddleware` as before. The measurement, and when to drop it:
docs/decisions/0004-one-layer-front.md; `GATEWAY_STOCK_RUNTIME=front` runs the same checks as
starlette's middleware instead (`server/stock_front.py`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple, Protocol

from starlette.datastructures import Headers, MutableHeaders
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import Settings
from ..observability import http_metrics
from ..observability.logs import RUN_ID_HEADER, request_id, run_id, valid_request_id
from ..protocol.clock import REQUEST_ARRIVED_MS, now_ms
from . import body_limit
from .sse import STOCK_KEY

HANDLERS_KEY = "starlette.exception_handlers"  # where starlette's routes find the handlers


async def _nowhere(message: Message) -> None:
    """The `send` CORS's header step is given: the front sends the message itself."""


class Exchange:
    """One HTTP request as it crosses the front: what its response's start needs."""

    __slots__ = ("scope", "server_send", "rid", "method", "arrived", "status", "cors")

    def __init__(self, scope: Scope, server_send: Send, rid: str) -> None:
        self.scope, self.server_send, self.rid = scope, server_send, rid
        self.method = http_metrics.method_label(scope["method"])
        self.arrived = time.perf_counter()
        self.status: int | None = None  # set as the response starts
        self.cors: Any = None  # CORS's header step, once the request is past the guard

    def send(self, message: Message) -> Awaitable[None]:
        """The app's `send`: a plain function, so a stream's body messages cost one call."""
        if message["type"] == "http.response.start":
            return self._start(message)
        return self.server_send(message)

    async def _start(self, message: Message) -> None:
        self.status = message["status"]
        if self.cors is not None:
            await self.cors(message)
        headers = MutableHeaders(scope=message)
        headers["x-request-id"] = self.rid
        # No browser guesses a type from a body a client wrote into (a message, a thread name).
        headers["x-content-type-options"] = "nosniff"
        # The server logs its access line as it sends this: a run's line names the run.
        if RUN_ID_HEADER in headers:
            run_id.set(headers[RUN_ID_HEADER])
        http_metrics.started(self.method, self.scope, time.perf_counter() - self.arrived)
        await self.server_send(message)


class Guard(Protocol):
    """Answers (True) a request that may not be served at all, before anything else."""

    def __call__(self, settings: Settings, scope: Scope, receive: Receive,
                 send: Send) -> Awaitable[bool]: ...


class Door(Protocol):
    """Refuses a run start while the process is saturated: the refusal, or None."""

    def refusal(self, scope: Scope) -> Response | None: ...


class Checks(NamedTuple):
    """What the front asks of the layers above it, in its order: the guard, the door, and the
    lookup of the credentials presented (which it leaves in the scope for the routes). Given
    by the app (`app.py`), so the process runtime imports none of them."""

    guard: Guard
    door: Door
    credentials: Callable[[Scope], Awaitable[None]]


def arrived(scope: Scope, server_send: Send) -> tuple[Exchange, bytes | None, bytes | None]:
    """A request as it arrives: its exchange (the request id taken or made, the arrival and the
    request id set for the request's task), its `Origin` and its declared `Content-Length`."""
    given = origin = declared = None
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            given = value
        elif name == b"origin":
            origin = value
        elif name == b"content-length":
            declared = value
    exchange = Exchange(scope, server_send, valid_request_id(given))
    REQUEST_ARRIVED_MS.set(now_ms())
    request_id.set(exchange.rid)  # each request runs in its own task: its own context
    return exchange, origin, declared


class Front:
    """The gateway's one middleware (see the module's docstring), around its router."""

    def __init__(self, router: ASGIApp, settings: Settings, cors: CORSMiddleware,
                 handlers: Mapping[Any, Any], checks: Checks) -> None:
        self.router, self.settings, self.cors = router, settings, cors
        self.stock_sse = "sse" in settings.stock_runtime
        self.guard, self.door, self.credentials = checks
        # Exception (or 500) is the unexpected error's handler; the rest answer what they name.
        self.unexpected = handlers.get(Exception) or handlers.get(500)
        self.handlers = {k: v for k, v in handlers.items() if k not in (Exception, 500)}
        self.status_handlers = {k: v for k, v in self.handlers.items() if isinstance(k, int)}
        self.websockets = ExceptionMiddleware(router, handlers=self.handlers)

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # A plain function returning the coroutine: one frame less that every resumption of
        # the request's task passes through.
        if scope["type"] == "http":
            return self._http(scope, receive, send)
        if scope["type"] == "websocket":
            return self._websocket(scope, receive, send)
        return self.router(scope, receive, send)  # the lifespan

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The checks in their order, then the router; the first refusal answers."""
        exchange, origin, declared = arrived(scope, send)
        if self.stock_sse:
            scope[STOCK_KEY] = True
        try:
            if await self.guard(self.settings, scope, receive, exchange.send):
                return
            preflight = None if origin is None else self._cors(scope, exchange)
            if preflight is not None:  # answered as it is, with its own CORS headers
                await preflight(scope, receive, exchange.send)
                return
            await self._routed(scope, receive, exchange, declared)
        finally:
            http_metrics.answered(exchange.method, scope, exchange.status)

    def _cors(self, scope: Scope, exchange: Exchange) -> Response | None:
        """A preflight's answer; for any other request with an `Origin`, CORS's header step
        set on the exchange (starlette's, run as the response starts)."""
        request_headers = Headers(scope=scope)
        if scope["method"] == "OPTIONS" and "access-control-request-method" in request_headers:
            return self.cors.preflight_response(request_headers)
        exchange.cors = functools.partial(self.cors.send, send=_nowhere,
                                          request_headers=request_headers)
        return None

    async def _routed(self, scope: Scope, receive: Receive, exchange: Exchange,
                      declared: bytes | None) -> None:
        """The door, the body limit, the key, then the router, inside the error handlers."""
        try:
            refusal = (self.door.refusal(scope)
                       or body_limit.declared_too_large(declared, self.settings.max_body_bytes))
            if refusal is not None:
                await refusal(scope, receive, exchange.send)
                return
            await self.credentials(scope)
            scope[HANDLERS_KEY] = (self.handlers, self.status_handlers)
            await self.router(scope, body_limit.counted(receive, self.settings.max_body_bytes),
                              exchange.send)
        except Exception as exc:
            await self._failed(scope, receive, exchange, exc)

    async def _failed(self, scope: Scope, receive: Receive, exchange: Exchange,
                      exc: Exception) -> None:
        """An exception that left the router: answered by its handler if it has one and the
        response has not started, else a 500 (if it has not) and raised for the server."""
        handler = None
        if isinstance(exc, HTTPException):
            handler = self.status_handlers.get(exc.status_code)
        if handler is None:
            handler = next((self.handlers[cls] for cls in type(exc).__mro__
                            if cls in self.handlers), None)
        if handler is not None and exchange.status is not None:
            raise RuntimeError("Caught handled exception, but response already started.") from exc
        if handler is not None:
            try:
                response = await handler(Request(scope, receive), exc)
                await response(scope, receive, exchange.send)
            except Exception as failed:  # the handler's own failure: the 500 below
                exc = failed
            else:
                exc.__traceback__ = None  # a reused exception would pile up tracebacks
                return
        if exchange.status is None and self.unexpected is not None:
            response = await self.unexpected(Request(scope), exc)
            await response(scope, receive, exchange.send)
        raise exc

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await self.guard(self.settings, scope, receive, send):
            return
        await self.credentials(scope)
        await self.websockets(scope, receive, send)
