"""How an HTTP operation is described, as data: the types every documented route declares itself
with (the API's resources in `openapi/spec.py`, each dialect in its `dialect.py`), the parameters
and error lists many share, and the ids and helpers their examples are written with.

The OpenAPI generator (`openapi/document.py`) reads the declarations; the dialects, which sit
below it, describe their own operations with these types without importing it.


Adding an endpoint means adding its route and one `Operation` (the API's resources:
`openapi/spec.py`; a dialect's endpoints: its `dialect.py`); a test fails while a route of
`create_app` has no entry or an entry has no route. Request and response shapes are the
pydantic models that validate and render them, so the document cannot describe a shape the
server does not use. Error codes are listed per operation: they are the `code` values of the
problem+json bodies that operation can answer with.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from . import tambo
from .problems import CATALOGUE

# The stable `code` of every problem+json body the gateway sends, with its HTTP status: the
# catalogue of `protocol/problems.py`, by code.
CODES = CATALOGUE

ParamIn = Literal["query", "header", "path"]


@dataclass(frozen=True)
class Param:
    name: str
    where: ParamIn
    schema: dict[str, Any]
    description: str
    required: bool = False
    deprecated: bool = False


@dataclass(frozen=True)
class Operation:
    """One method on one path. `path` is the Starlette route path, exactly as registered."""

    method: str
    path: str
    id: str
    summary: str
    tag: str
    description: str = ""
    body: type[BaseModel] | None = None
    body_media_type: str = "application/json"
    params: tuple[Param, ...] = ()
    status: int = 200
    result: Any = None  # the JSON body's type; None: no body
    # An SSE stream of the events of that name (a dialect's `event_schema`); with `result`
    # too, the alternative to it.
    stream: str | None = None
    media_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)  # response headers always sent
    other: dict[int, str] = field(default_factory=dict)  # other bodiless successes (304, ...)
    alternates: dict[int, str] = field(default_factory=dict)  # other statuses, same body
    errors: tuple[str, ...] = ()  # codes beyond the ones every operation of its kind has
    public: bool = False  # no API key needed
    # Errors in another shape than problem+json (the Timbal write path's `{error, message,
    # details}`): its model, and how a problem+json body becomes it (for the examples).
    error_model: Any = None
    error_shape: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    def codes(self) -> list[str]:
        """Every problem code this operation can answer with, in a stable order."""
        implied: list[str] = ["LOOPBACK_ONLY"]  # development mode, for any operation
        if not self.public:
            implied += ["UNAUTHORIZED", "INVALID_TOKEN", "TOKEN_EXPIRED", "TOO_MANY_KEY_LOOKUPS"]
            if not self.path.startswith("/v1/admin/"):  # an admin key opens those only
                implied.append("ADMIN_KEY_NOT_ALLOWED")
        if self.body is not None:
            implied += ["VALIDATION_ERROR", "INVALID_JSON", "PAYLOAD_TOO_LARGE"]
            if self.body_media_type == "application/json":
                implied += ["JSON_TOO_DEEP", "INTEGER_OUT_OF_RANGE", "NUMBER_OUT_OF_RANGE",
                            "NUL_CHARACTER"]
        if any(p.where == "query" and p.name in ("userKey", "limit", "order")
               for p in self.params):
            implied.append("VALIDATION_ERROR")
        if any(p.where == "query" and p.name in ("userKey", "contextKey") for p in self.params):
            implied.append("NUL_CHARACTER")
        if "{" in self.path:
            implied.append("NOT_FOUND")
        if "{thread_id}" in self.path:
            implied.append("THREAD_NOT_FOUND")
        wanted = {*implied, *self.errors, "INTERNAL_ERROR"}
        if not self.public:  # every operation that reads or writes the database
            wanted.add("DATABASE_UNAVAILABLE")
        return [code for code in CODES if code in wanted]


# -- parameters shared by many operations ---------------------------------------------------------

USER_KEY = Param(
    "userKey", "query",
    tambo.USER_KEY_SCHEMA,
    "The end user the thread belongs to (trimmed; at most 512 characters). Threads of another "
    "userKey are invisible. Required to list or create threads (unless signed in with a bearer "
    "token, whose user it is); optional where `@tambo-ai/client` sends none.")
CONTEXT_KEY = Param(
    "contextKey", "query", USER_KEY.schema, "Alias of `userKey` (the Tambo proposal's name).",
    deprecated=True)
KEYS = (USER_KEY, CONTEXT_KEY)
CURSOR = Param("cursor", "query", {"type": "string"},
               "Opaque cursor from the previous page's `nextCursor`.")


_TEXT = {"type": "string", "maxLength": 256}
_TIME = {"type": "string", "format": "date-time"}
# The thread list's search filters (`GET /v1/threads`, and the AG-UI list `GET /v1/agui/threads`).
THREAD_FILTERS = (
    Param("status", "query", {"type": "string", "enum": ["idle", "waiting", "streaming"]},
          "Only threads in this run status."),
    Param("agent", "query", {"type": "string", "maxLength": 64},
          "Only threads of this agent (the default agent's include threads that name none)."),
    Param("namePrefix", "query", _TEXT, "Only threads whose name starts with this text "
          "(case-sensitive)."),
    Param("createdAfter", "query", _TIME, "Only threads created at or after this time."),
    Param("createdBefore", "query", _TIME, "Only threads created before this time."),
    Param("updatedAfter", "query", _TIME, "Only threads updated at or after this time."),
    Param("updatedBefore", "query", _TIME, "Only threads updated before this time."),
)


def limit(default: int, high: int) -> Param:
    return Param("limit", "query",
                 {"type": "integer", "minimum": 1, "maximum": high, "default": default},
                 f"Page size (1 to {high}).")


IDEMPOTENCY_KEY = Param(
    "Idempotency-Key", "header", {"type": "string", "minLength": 1, "maxLength": 255,
                                  "pattern": tambo.NOT_BLANK},
    "A retried request with the same key on the same thread reattaches to the run it started "
    "instead of starting another; the same key with a different body is refused (422). Keys "
    "are remembered for `GATEWAY_IDEMPOTENCY_TTL_SECONDS`.")
EVENT_CURSOR = {"type": "string", "pattern": "^[0-9]{0,18}$"}
# The cursor of a stream's reconnect, in either of its two spellings.
REPLAY = (Param("after", "query", EVENT_CURSOR,
                "Replay from after this event position (wins over `Last-Event-ID`); empty: "
                "from the start."),
          Param("Last-Event-ID", "header", EVENT_CURSOR,
                "The last event position the client has; empty: from the start."))
STREAM_HEADERS = {"X-Run-Id": "The run's id.", "X-Thread-Id": "The thread's id."}
RUN_ERRORS = ("INVALID_PREVIOUS_RUN", "INVALID_TOOL_RESULT", "CONCURRENT_RUN",
              "IDEMPOTENCY_KEY_IN_USE", "IDEMPOTENCY_KEY_REUSED", "MODEL_NOT_ALLOWED",
              "INVALID_ATTACHMENT", "UNSUPPORTED_ATTACHMENT", "ATTACHMENT_TOO_LARGE",
              "SHUTTING_DOWN", "OVERLOADED", "MESSAGE_TOO_LARGE", "SCHEMA_TOO_LARGE", "TOO_MANY_TOOLS",
              "TOO_MANY_COMPONENTS", "RATE_LIMITED", "TOO_MANY_CONCURRENT_RUNS",
              "TOKEN_BUDGET_EXCEEDED", "UNSUPPORTED_SCHEMA_PATTERN", "UNSUPPORTED_SCHEMA_REF",
              "UNSUPPORTED_SCHEMA_KEYWORD", "METADATA_TOO_LARGE", "IMAGE_URL_NOT_ALLOWED", "AGENT_NOT_FOUND",
              "SYSTEM_PROMPT_NOT_ALLOWED", "QUOTAS_UNAVAILABLE", "WEBHOOK_NOT_ALLOWED")
# What creating a thread may be refused for: its seeded messages, the number of threads, the
# key's runs per minute (a creation counts as a start), and an id (or name) the client chose
# that starts like one the gateway mints.
STORED_CAPS = ("METADATA_TOO_LARGE", "TOO_MANY_INITIAL_MESSAGES", "MESSAGE_TOO_LARGE",
               "THREAD_LIMIT_REACHED", "RATE_LIMITED", "QUOTAS_UNAVAILABLE", "RESERVED_THREAD_ID")
MODEL_ERRORS = ("LLM_ERROR", "LLM_CLIENT_ERROR", "LLM_SERVER_ERROR", "LLM_RATE_LIMITED",
                "LLM_AUTHENTICATION_ERROR", "LLM_TIMEOUT", "LLM_CONTEXT_WINDOW_EXCEEDED",
                "LLM_UNREACHABLE")
# A one-shot model call (name, suggestions, transcription): the provider's failures, and the
# quotas it is metered against as runs are.
METERED_ERRORS = (*MODEL_ERRORS, "RATE_LIMITED", "TOO_MANY_CONCURRENT_RUNS",
                  "TOKEN_BUDGET_EXCEEDED", "QUOTAS_UNAVAILABLE")
# Some helpers are served on the beta path (where `@tambo-ai/react` and `TamboClient` call them)
# and on the v1 path: (path prefix, operationId suffix, summary note).
BETA_AND_V1 = (("/v1/threads", "", ""),
               ("/threads", "Beta", " (the beta path the Tambo clients call)"))
COMPONENT_STATE = "/v1/threads/{thread_id}/components/{component_id}/state"


# -- what the examples are written with ----------------------------------------------------------

THREAD = "thr_01JH8Z3Q4W5E6R7T8Y9V0W1X2Y"
RUN = "run_01JH8Z3R0A1B2C3D4E5F6G7H8J"
PREVIOUS_RUN = "run_01JH8Z2M9K8J7H6G5F4E3D2C1B"
USER_MESSAGE = "01JH8Z3R0B2C3D4E5F6G7H8J9K"
MESSAGE = "01JH8Z3R1C2D3E4F5G6H7J8K9M"
COMPONENT = "comp_01JH8Z3R2D3E4F5G6H7J8K9MN"
CALL = "call_weather_1"
EXAMPLE_USER_KEY = "user-1"
CREATED = "2026-01-05T10:00:00.000Z"
UPDATED = "2026-01-05T10:00:03.250Z"
T = 1767607200000  # CREATED in epoch milliseconds


def sse(events: list[dict[str, Any]]) -> str:
    """A run stream's text, as a client reads it: events numbered from 1."""
    return "".join(f"id: {n}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n"
                   for n, event in enumerate(events, start=1))
