"""problem+json responses (RFC 9457) with a stable `code`: how every refusal before a stream
is written, by the app's handlers (`api/errors.py`) and by the front's own checks (the body
limit, development mode's guard, the door), which answer before any route."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import ValidationError
from starlette.responses import JSONResponse

from ..protocol.problems import ApiError, Problem


def problem(kind: Problem, detail: str, **extra: Any) -> JSONResponse:
    """The problem+json response of a problem of the catalogue."""
    return problem_response(kind.status, kind.name, kind.title, detail, **extra)


def problem_response(status: int, code: str, title: str, detail: str, **extra: Any) -> JSONResponse:
    body = {
        "type": f"urn:tambo:error:{code.lower()}",
        "title": title,
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
    return problem(Problem.VALIDATION_ERROR, f"Invalid request: {first[0]}: {first[1]}",
                   errors=errors)


def api_error_response(exc: ApiError) -> JSONResponse:
    """The problem+json response of an `ApiError`, with its headers (e.g. `Retry-After`)."""
    answer = problem(exc.problem, exc.detail, **exc.extra)
    answer.headers.update(getattr(exc, "headers", None) or {})
    return answer
