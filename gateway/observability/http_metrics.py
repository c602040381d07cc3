"""HTTP request metrics by route template and status, as a pure ASGI middleware.

The route label is the template the request matched (`/v1/threads/{thread_id}/runs`), read
from the scope once the router has matched it, so the label set stays bounded whatever ids
clients send; a request that matched no route is `unmatched`. Duration is to the response's
first byte (its status and headers): a run's stream stays open for the whole run, and its
length is the run's, already measured by the run metrics.
"""

from __future__ import annotations

import time

from prometheus_client import Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

UNMATCHED = "unmatched"

HTTP_REQUESTS = Counter(
    "gateway_http_requests", "HTTP requests answered, by method, route template and status.",
    ["method", "route", "status"])
HTTP_RESPONSE_START = Histogram(
    "gateway_http_response_start_seconds",
    "From a request's arrival to its response's status and headers, by method and route "
    "template (for a stream: until it starts).", ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))


def route_template(scope: Scope) -> str:
    """The matched route's template (a mount's prefix for its files: `/web`)."""
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else UNMATCHED


class HttpMetricsMiddleware:
    """Counts every HTTP response (refusals by the middleware inside it, and the 500 of an
    unexpected error, too) once."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        method = scope["method"] if scope["method"] in _METHODS else "other"
        # The server-error handler is inside this middleware: an unexpected error's 500 is
        # sent through here. Ending without any answer is a request its client abandoned
        # (nginx's 499).
        status = "499"

        async def send_counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = str(message["status"])
                HTTP_RESPONSE_START.labels(method, route_template(scope)).observe(
                    time.perf_counter() - started)
            await send(message)

        try:
            await self.app(scope, receive, send_counted)
        finally:
            HTTP_REQUESTS.labels(method, route_template(scope), status).inc()


_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
