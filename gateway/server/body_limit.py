"""A cap on request bodies, enforced as the bytes arrive.

Checked twice by the front (`server/front.py`), both before the body is held in memory: a declared `Content-Length` over the cap
is refused before a byte is read, and a body without one (chunked) is counted while the route
reads it and refused at the first chunk that crosses the cap.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.types import Message, Receive

from ..observability import metrics
from ..protocol.problems import Problem
from .problem_json import problem


def _too_large(limit: int) -> str:
    return f"The request body is larger than {limit} bytes"


class BodyTooLarge(HTTPException):
    """Raised from `receive` mid-read; the app's HTTP error handler answers it as a 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, _too_large(limit))


def declared_too_large(declared: bytes | None, max_bytes: int) -> Response | None:
    """The 413 for a request whose `Content-Length` is over the cap, before a byte is read."""
    if declared is None or not declared.isdigit() or int(declared) <= max_bytes:
        return None
    metrics.REFUSALS.labels("PAYLOAD_TOO_LARGE").inc()
    response = problem(Problem.PAYLOAD_TOO_LARGE, _too_large(max_bytes))
    response.headers["Connection"] = "close"  # the unread body must not be parsed next
    return response


def counted(receive: Receive, max_bytes: int) -> Receive:
    """`receive` counting the body's bytes, refusing at the first chunk over the cap."""
    received = 0

    async def counting() -> Message:
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > max_bytes:
                metrics.REFUSALS.labels("PAYLOAD_TOO_LARGE").inc()
                raise BodyTooLarge(max_bytes)
        return message

    return counting
