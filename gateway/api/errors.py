"""Problem details (RFC 9457) with a stable `code`, for every error before a stream starts.

`ApiError` is raised anywhere below the routes (the run manager raises it too: refusing a run is
an HTTP answer, never an event). The handlers here turn it, a validation failure, or anything
unexpected into a problem+json body; an unexpected error is logged with its trace, and the client
gets an opaque incident id, never the trace.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Match, Route

from ..protocol.problems import ApiError, InvalidRequest
from ..runs.component_state import ComponentStateError
from ..store.base import UNAVAILABLE
from ..store.cursors import InvalidCursor
from .spec import CODES

log = logging.getLogger(__name__)

TITLES = {
    400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
    405: "Method Not Allowed", 406: "Not Acceptable", 409: "Conflict", 410: "Gone",
    412: "Precondition Failed", 413: "Payload Too Large", 415: "Unsupported Media Type",
    422: "Unprocessable Content", 429: "Too Many Requests", 500: "Internal Error",
    503: "Service Unavailable",
}
HTTP_CODES = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 406: "NOT_ACCEPTABLE",
              413: "PAYLOAD_TOO_LARGE", 415: "UNSUPPORTED_MEDIA_TYPE"}


def problem(status: int, code: str, detail: str, **extra: Any) -> JSONResponse:
    body = {
        "type": f"urn:tambo:error:{code.lower()}",
        "title": code.replace("_", " ").title() if code else TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
        "code": code,
        "message": detail,  # the Tambo SDK builds its error text from `message`
        "instance": f"urn:tambo:error-instance:{uuid.uuid4()}",
        **extra,
    }
    return JSONResponse(body, status_code=status, media_type="application/problem+json")


def validation_problem(exc: ValidationError) -> JSONResponse:
    errors: dict[str, str] = {}
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in error["loc"]) or "body"
        errors.setdefault(where, error["msg"])
    first = next(iter(errors.items()), ("body", "invalid"))
    return problem(400, "VALIDATION_ERROR", f"Invalid request: {first[0]}: {first[1]}",
                   errors=errors)


async def api_error_handler(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    response = problem(exc.status, exc.code, exc.detail, **exc.extra)
    response.headers.update(getattr(exc, "headers", None) or {})  # e.g. Retry-After
    return response


async def component_state_error_handler(_: Request, exc: Exception) -> JSONResponse:
    """The component state service's domain error, with the status its code has in the API."""
    assert isinstance(exc, ComponentStateError)
    return problem(CODES[exc.code].status, exc.code, exc.message, **exc.details)


async def validation_error_handler(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, InvalidRequest)
    return validation_problem(exc.error)


async def http_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    code = HTTP_CODES.get(exc.status_code, "HTTP_ERROR")
    detail = exc.detail if isinstance(exc.detail, str) else TITLES.get(exc.status_code, "Error")
    response = problem(exc.status_code, code, detail)
    if exc.headers:
        response.headers.update(exc.headers)
    if exc.status_code == 405:
        response.headers["Allow"] = ", ".join(allowed_methods(request))
    return response


def allowed_methods(request: Request) -> list[str]:
    """Every method of the path template the request matched first, across its routes.

    Starlette answers 405 from the first route whose path matches, so its `Allow` names only
    that route's methods, while our resources register one route per method. (A concrete path
    such as `/v1/threads/runs` wins over a template that also matches it, as in OpenAPI.)
    """
    routes = [r for r in request.app.router.routes if isinstance(r, Route)]
    first = next((r for r in routes if r.matches(request.scope)[0] != Match.NONE), None)
    if first is None:
        return []
    return sorted({m for r in routes if r.path == first.path for m in r.methods or ()})


async def cursor_error_handler(_: Request, exc: Exception) -> JSONResponse:
    return problem(400, "INVALID_CURSOR", "The pagination cursor is not valid")


async def database_unavailable_handler(request: Request, exc: Exception) -> JSONResponse:
    log.warning("database unreachable on %s %s: %s", request.method, request.url.path,
                type(exc).__name__)
    return problem(503, "DATABASE_UNAVAILABLE",
                   "The gateway cannot reach its database right now; retry shortly",
                   isRetryable=True)


async def unexpected_error_handler(request: Request, exc: Exception) -> JSONResponse:
    incident = uuid.uuid4().hex[:12]
    log.exception("unexpected error %s on %s %s", incident, request.method, request.url.path)
    return problem(500, "INTERNAL_ERROR", f"An internal error occurred (incident {incident})")


HANDLERS = {
    ApiError: api_error_handler,
    ComponentStateError: component_state_error_handler,
    InvalidRequest: validation_error_handler,
    HTTPException: http_error_handler,
    InvalidCursor: cursor_error_handler,
    **{error: database_unavailable_handler for error in UNAVAILABLE},
    Exception: unexpected_error_handler,
}
