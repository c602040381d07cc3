"""Problem details (RFC 9457) with a stable `code`, for every error before a stream starts.

`ApiError` is raised anywhere below the routes (the run manager raises it too: refusing a run is
an HTTP answer, never an event). The handlers here turn it, a validation failure, or anything
unexpected into a problem+json body; an unexpected error is logged with its trace, and the client
gets an opaque incident id, never the trace.
"""

from __future__ import annotations

import logging
import uuid

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Match, Route

from ..observability import outages
from ..protocol.problems import ApiError, InvalidRequest, Problem
from ..runs.components.state import ComponentStateError
from ..server.problem_json import (
    api_error_response,
    problem,
    problem_response,
    validation_problem,
)
from ..store.base import UNAVAILABLE, is_refused_value
from ..store.cursors import InvalidCursor

log = logging.getLogger(__name__)

# Starlette's own HTTP errors (no route, wrong method, a body over the limit), by status.
HTTP_PROBLEMS = {404: Problem.NOT_FOUND, 405: Problem.METHOD_NOT_ALLOWED,
                 413: Problem.PAYLOAD_TOO_LARGE, 415: Problem.UNSUPPORTED_MEDIA_TYPE}
# Any other status Starlette may raise has no code of its own in the catalogue.
HTTP_ERROR = "HTTP_ERROR"


async def api_error_handler(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return api_error_response(exc)


async def component_state_error_handler(_: Request, exc: Exception) -> JSONResponse:
    """The component state service's domain error, with the status its code has in the API."""
    assert isinstance(exc, ComponentStateError)
    return problem(exc.problem, exc.message, **exc.details)


async def validation_error_handler(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, InvalidRequest)
    return validation_problem(exc.error)


async def http_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    known = HTTP_PROBLEMS.get(exc.status_code)
    detail = exc.detail if isinstance(exc.detail, str) else "Error"
    response = (problem(known, detail) if known is not None else
                problem_response(exc.status_code, HTTP_ERROR, "Http Error", detail))
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
    return problem(Problem.INVALID_CURSOR, "The pagination cursor is not valid")


async def database_unavailable_handler(request: Request, exc: Exception) -> JSONResponse:
    if is_refused_value(exc):  # on PostgreSQL: a NUL character in a key, a name or an id
        log.warning("database refused a value on %s %s", request.method, request.url.path)
        return problem(Problem.VALIDATION_ERROR,
                       "The request holds a value the database cannot store (such as a NUL "
                       "character)")
    # Said once per outage, not once per request.
    outages.down("database", f"{request.method} {request.url.path}: {type(exc).__name__}")
    return problem(Problem.DATABASE_UNAVAILABLE,
                   "The gateway cannot reach its database right now; retry shortly",
                   isRetryable=True)


async def unexpected_error_handler(request: Request, exc: Exception) -> JSONResponse:
    incident = uuid.uuid4().hex[:12]
    log.exception("unexpected error %s on %s %s", incident, request.method, request.url.path)
    return problem(Problem.INTERNAL_ERROR, f"An internal error occurred (incident {incident})")


HANDLERS = {
    ApiError: api_error_handler,
    ComponentStateError: component_state_error_handler,
    InvalidRequest: validation_error_handler,
    HTTPException: http_error_handler,
    InvalidCursor: cursor_error_handler,
    **{error: database_unavailable_handler for error in UNAVAILABLE},
    Exception: unexpected_error_handler,
}
