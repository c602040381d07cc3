"""A cap on request bodies, enforced as the bytes arrive.

Checked twice, both before the body is held in memory: a declared `Content-Length` over the cap
is refused before a byte is read, and a body without one (chunked) is counted while the route
reads it and refused at the first chunk that crosses the cap.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..observability import metrics
from ..protocol.problems import Problem
from .errors import problem


def _too_large(limit: int) -> str:
    return f"The request body is larger than {limit} bytes"


class BodyTooLarge(HTTPException):
    """Raised from `receive` mid-read; the app's HTTP error handler answers it as a 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, _too_large(limit))


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            metrics.REFUSALS.labels("PAYLOAD_TOO_LARGE").inc()
            response = problem(Problem.PAYLOAD_TOO_LARGE, _too_large(self.max_bytes))
            response.headers["Connection"] = "close"  # the unread body must not be parsed next
            await response(scope, receive, send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    metrics.REFUSALS.labels("PAYLOAD_TOO_LARGE").inc()
                    raise BodyTooLarge(self.max_bytes)
            return message

        await self.app(scope, counted, send)
