"""The front's checks as starlette's own middleware, one layer per check
(`GATEWAY_STOCK_RUNTIME=front`), to measure what the one-layer front is worth.

The same checks in the same order, each refusal the same (`tests/unit/test_front.py` runs on
both): the request id and the HTTP metrics; development mode's guard (and, for a WebSocket
handshake, the key lookup); starlette's `CORSMiddleware` for every request; starlette's
`ServerErrorMiddleware` (an unexpected error's 500, which crosses CORS and the request id on
its way out, then raised for the server to log) and `ExceptionMiddleware` (the app's handlers);
then the door, the body limit and the key lookup, each a layer of its own; then the router.
Each layer that sees a response wraps `send` in a coroutine of its own, as starlette's do, so a
stream's every event crosses them all: the cost the front removes (docs/decisions/0004).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import Settings
from ..observability import http_metrics
from . import body_limit
from .front import Checks, arrived
from .sse import STOCK_KEY


class RequestContext:
    """The request id (taken or made, echoed with `nosniff`) and the HTTP metrics."""

    def __init__(self, app: ASGIApp, stock_sse: bool) -> None:
        self.app, self.stock_sse = app, stock_sse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exchange, _, _ = arrived(scope, send)
        if self.stock_sse:
            scope[STOCK_KEY] = True

        async def sending(message: Message) -> None:
            await exchange.send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            http_metrics.answered(exchange.method, scope, exchange.status)


class Guard:
    """Development mode's loopback-only guard; a WebSocket handshake's key lookup."""

    def __init__(self, app: ASGIApp, settings: Settings, checks: Checks) -> None:
        self.app, self.settings, self.checks = app, settings, checks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            if await self.checks.guard(self.settings, scope, receive, send):
                return
            if scope["type"] == "websocket":
                await self.checks.credentials(scope)
        await self.app(scope, receive, send)


class Door:
    """A run start refused while the process is saturated."""

    def __init__(self, app: ASGIApp, checks: Checks) -> None:
        self.app, self.checks = app, checks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = self.checks.door.refusal(scope) if scope["type"] == "http" else None
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)


class BodyLimit:
    """A declared body over the cap refused unread; a chunked one counted as it arrives."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = next((value for name, value in scope["headers"]
                         if name == b"content-length"), None)
        refusal = body_limit.declared_too_large(declared, self.max_bytes)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, body_limit.counted(receive, self.max_bytes), send)


class Credentials:
    """The managed key presented (or the one a bearer token names), looked up for the routes."""

    def __init__(self, app: ASGIApp, checks: Checks) -> None:
        self.app, self.checks = app, checks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.checks.credentials(scope)
        await self.app(scope, receive, send)


def stock_front(router: ASGIApp, settings: Settings, cors: Mapping[str, Any],
                handlers: Mapping[Any, Any], checks: Checks) -> ASGIApp:
    """The middleware stack, outermost first as listed in the module's docstring; `cors` are
    `CORSMiddleware`'s options, `handlers` the app's exception handlers."""
    unexpected = handlers.get(Exception) or handlers.get(500)
    handled = {k: v for k, v in handlers.items() if k not in (Exception, 500)}
    app: ASGIApp = Credentials(router, checks)
    app = BodyLimit(app, settings.max_body_bytes)
    app = Door(app, checks)
    app = ExceptionMiddleware(app, handlers=handled)
    app = ServerErrorMiddleware(app, handler=unexpected)
    app = CORSMiddleware(app, **cors)
    app = Guard(app, settings, checks)
    return RequestContext(app, "sse" in settings.stock_runtime)
