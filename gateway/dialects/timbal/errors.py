"""Errors of the Timbal write path in the spec's shape: `{error, message, details}`.

The gateway decides every refusal once, as a problem of its catalogue (`protocol/problems.py`)
answered by the app's handlers (`api/errors.py`); this only re-shapes that answer for a Timbal
client. `error` is the spec's code for the status (`invalid_request`, `unauthorized`,
`thread_not_found`, `conflict`, `rate_limited`, ...), `details.code` the gateway's stable code
with the problem's other fields, and a 429 keeps its `Retry-After` (also as `retryAfter`, as
the spec's example has it). `X-Request-Id` is on every response already (`server/front.py`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# The spec's codes (spec/http.md §8), by HTTP status.
CODES = {400: "invalid_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
         409: "conflict", 413: "invalid_request", 415: "invalid_request", 422: "invalid_request",
         429: "rate_limited", 503: "service_unavailable"}
# What a problem+json body carries that the Timbal shape says otherwise.
_PROBLEM_KEYS = {"type", "title", "status", "detail", "code", "message", "instance"}


def spec_code(status: int, code: str) -> str:
    if code == "THREAD_NOT_FOUND":
        return "thread_not_found"
    return CODES.get(status, "server_error" if status >= 500 else "invalid_request")


def error_body(status: int, problem: dict[str, Any], retry_after: str | None) -> dict[str, Any]:
    """The Timbal error body of a problem+json body (`api/errors.py`) of this status."""
    details: dict[str, Any] = {"code": problem["code"]}
    details.update((k, v) for k, v in problem.items() if k not in _PROBLEM_KEYS)
    body: dict[str, Any] = {"error": spec_code(status, problem["code"]),
                            "message": problem["message"], "details": details}
    if retry_after is not None and retry_after.isdigit():
        body["retryAfter"] = int(retry_after)
    return body


def example(problem: dict[str, Any]) -> dict[str, Any]:
    """The Timbal body of a problem+json example (the OpenAPI document's)."""
    return error_body(problem["status"], problem, None)


class ErrorDetails(BaseModel):
    model_config = ConfigDict(extra="allow")

    code: str = Field(description="The gateway's stable problem code (docs/errors.md).")


class TimbalError(BaseModel):
    """An error of the Timbal write path (spec/http.md §8)."""

    error: str = Field(description="The spec's code: invalid_request, unauthorized, forbidden, "
                                   "not_found, thread_not_found, conflict, rate_limited, "
                                   "server_error or service_unavailable.")
    message: str
    details: ErrorDetails
    retryAfter: int | None = Field(None, description="On 429: seconds, as `Retry-After`.")
