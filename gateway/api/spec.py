"""The API, as data: one entry per operation, read by the OpenAPI generator and the docs page.

Adding an endpoint means adding its route (in its resource module) and one `Operation` here (a
dialect's endpoints: in its folder, `gateway/dialects/<name>/dialect.py`); a test fails while a
route of `create_app` has no entry or an entry has no route. Request and
response shapes are the pydantic models that validate and render them, so the document cannot
describe a shape the server does not use. Error codes are listed per operation: they are the
`code` values of the problem+json bodies that operation can answer with.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from ..protocol import tambo
from ..protocol.admin import (
    AdminFrameList,
    AdminRunDetail,
    AdminRunList,
    AdminThreadList,
    AdminUsageReport,
)
from ..protocol.agents import AgentList
from ..protocol.problems import CATALOGUE

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
              "SYSTEM_PROMPT_NOT_ALLOWED")
# What creating a thread may be refused for: its seeded messages and the number of threads.
STORED_CAPS = ("METADATA_TOO_LARGE", "TOO_MANY_INITIAL_MESSAGES", "MESSAGE_TOO_LARGE",
               "THREAD_LIMIT_REACHED")
MODEL_ERRORS = ("LLM_ERROR", "LLM_CLIENT_ERROR", "LLM_SERVER_ERROR", "LLM_RATE_LIMITED",
                "LLM_AUTHENTICATION_ERROR", "LLM_TIMEOUT", "LLM_CONTEXT_WINDOW_EXCEEDED",
                "LLM_UNREACHABLE")
# A one-shot model call (name, suggestions, transcription): the provider's failures, and the
# quotas it is metered against as runs are.
METERED_ERRORS = (*MODEL_ERRORS, "RATE_LIMITED", "TOO_MANY_CONCURRENT_RUNS",
                  "TOKEN_BUDGET_EXCEEDED")
# Some helpers are served on the beta path (where `@tambo-ai/react` and `TamboClient` call them)
# and on the v1 path: (path prefix, operationId suffix, summary note).
BETA_AND_V1 = (("/v1/threads", "", ""),
               ("/threads", "Beta", " (the beta path the Tambo clients call)"))
COMPONENT_STATE = "/v1/threads/{thread_id}/components/{component_id}/state"


ADMIN_ERRORS = ("ADMIN_KEY_REQUIRED", "VALIDATION_ERROR")
ADMIN_USER = Param("userKey", "query", tambo.USER_KEY_SCHEMA,
                   "Only this user scope's (a userKey, or `oauth:...` of a signed-in user).")
ADMIN_AGENT = Param("agent", "query", {"type": "string", "maxLength": 64},
                    "Only this agent's.")


def admin_window(since: str, until: str, what: str) -> tuple[Param, Param]:
    """The time window of an operator call: at most 366 days, 30 by default."""
    return (Param(since, "query", {"type": "string", "format": "date-time"},
                  f"Only {what} at or after this time (default: 30 days before `{until}`)."),
            Param(until, "query", {"type": "string", "format": "date-time"},
                  f"Only {what} before this time (default: now). The window is at most 366 "
                  "days."))


def scoped(prefix: str) -> tuple[str, ...]:
    """The suggestion calls need a user scope on a user's thread on /v1 only: the clients call
    the beta paths without one."""
    return ("USER_SCOPE_REQUIRED",) if prefix.startswith("/v1") else ()

# -- the operations -------------------------------------------------------------------------------

OPERATIONS: tuple[Operation, ...] = (
    Operation("GET", "/health", "health", "Liveness check", "meta", public=True,
              result=dict[str, str]),
    Operation("GET", "/ready", "ready", "Readiness check: the database (and Redis, when "
              "configured) answers and the process is neither shutting down nor saturated",
              "meta", public=True,
              result=dict[str, Any], errors=("DATABASE_UNAVAILABLE", "REDIS_UNAVAILABLE",
                                             "SHUTTING_DOWN", "OVERLOADED")),
    Operation("GET", "/metrics", "metrics", "Prometheus metrics (text exposition format)",
              "meta", public=True, result=str, media_type="text/plain"),
    Operation("GET", "/openapi.json", "openapi", "This OpenAPI document", "meta", public=True,
              result=dict[str, Any]),
    Operation("GET", "/", "playground", "The playground: try the API in a browser (offline "
              "HTML)", "meta", public=True, result=str, media_type="text/html"),
    Operation("GET", "/docs", "docs", "This API reference (Swagger UI, offline)", "meta",
              public=True, result=str, media_type="text/html"),
    Operation("GET", "/v1/agents", "listAgents", "The agents a client may run", "agents",
              description="Name and description of each of the operator's agents (from "
                          "`GATEWAY_AGENTS_FILE`, or the one `default` agent), in the shape of "
                          "CopilotKit's runtime `info`, so a UI can offer a picker; and the "
                          "models a run may pick (`models`).",
              result=AgentList),
    # threads
    Operation("POST", "/v1/threads", "createThread", "Create a thread", "threads",
              body=tambo.ThreadCreateRequest, params=KEYS, status=201, result=tambo.Thread,
              errors=("USER_SCOPE_REQUIRED", *STORED_CAPS, "AGENT_NOT_FOUND",
                      "SYSTEM_PROMPT_NOT_ALLOWED")),
    Operation("GET", "/v1/threads", "listThreads", "List threads, newest first", "threads",
              params=(*KEYS, limit(20, 100), CURSOR), result=tambo.ThreadList,
              errors=("INVALID_CURSOR", "USER_SCOPE_REQUIRED")),
    Operation("GET", "/v1/threads/{thread_id}", "getThread", "A thread with its messages",
              "threads", params=KEYS, result=tambo.ThreadWithMessages),
    Operation("PATCH", "/v1/threads/{thread_id}", "updateThread", "Rename a thread or replace "
              "its metadata", "threads", body=tambo.ThreadUpdateRequest, params=KEYS,
              result=tambo.Thread, errors=("METADATA_TOO_LARGE",)),
    Operation("DELETE", "/v1/threads/{thread_id}", "deleteThread", "Delete a thread (cancelling "
              "its active run)", "threads", params=KEYS, status=204,
              errors=("USER_SCOPE_REQUIRED",)),
    Operation("POST", "/v1/threads/{thread_id}/fork", "forkThread", "Fork a thread at a "
              "message", "threads", body=tambo.ForkRequest, params=KEYS, status=201,
              description="A new thread (same user scope, agent and metadata) whose history "
                          "is this thread's up to and including `messageId`, with the state of "
                          "its components; it records its origin in `forkedFrom`. The "
                          "original is unchanged. Regenerate: fork at the message before an "
                          "answer, then run; edit: fork before a message, then run the new "
                          "text.",
              result=tambo.ThreadWithMessages,
              errors=("MESSAGE_NOT_FOUND", "INVALID_FORK_POINT", "USER_SCOPE_REQUIRED",
                      "THREAD_LIMIT_REACHED")),
    *(Operation("POST", f"{prefix}/{{thread_id}}/generate-name", f"generateThreadName{alias}",
                "Name the thread from its history" + note, "threads", params=KEYS,
                result=tambo.NamedThread, errors=METERED_ERRORS)
      for prefix, alias, note in BETA_AND_V1),
    # messages
    Operation("GET", "/v1/threads/{thread_id}/messages", "listMessages", "List a thread's "
              "messages", "messages",
              params=(*KEYS, limit(50, 200), CURSOR,
                      Param("order", "query", {"type": "string", "enum": ["asc", "desc"],
                                               "default": "asc"}, "Sort order by creation.")),
              result=tambo.MessageList, errors=("INVALID_CURSOR",)),
    Operation("GET", "/v1/threads/{thread_id}/messages/{message_id}", "getMessage",
              "One message", "messages", params=KEYS, result=tambo.Message,
              errors=("MESSAGE_NOT_FOUND", "USER_SCOPE_REQUIRED")),
    *(op for prefix, alias, note in BETA_AND_V1 for op in (
        Operation("GET", f"{prefix}/{{thread_id}}/messages/{{message_id}}/suggestions",
                  f"listSuggestions{alias}", "A message's stored suggestions" + note,
                  "suggestions", params=KEYS,
                  result=tambo.SuggestionList if prefix.startswith("/v1") else list[
                      tambo.Suggestion], errors=("MESSAGE_NOT_FOUND", *scoped(prefix))),
        Operation("POST", f"{prefix}/{{thread_id}}/messages/{{message_id}}/suggestions",
                  f"createSuggestions{alias}", "Generate follow-up suggestions" + note,
                  "suggestions", body=tambo.SuggestionsRequest, params=KEYS, status=201,
                  result=tambo.SuggestionList if prefix.startswith("/v1") else list[
                      tambo.Suggestion],
                  errors=("MESSAGE_NOT_FOUND", *scoped(prefix), *METERED_ERRORS)))),
    # signed-in users
    Operation("POST", "/oauth/token", "exchangeToken", "Exchange an identity provider's token "
              "for a gateway access token (RFC 8693)", "auth",
              description="Called by `TamboProvider userToken=...`. The subject token is "
                          "verified against the configured identity providers; the access "
                          "token binds the API key's project and the token subject's user "
                          "scope, and is sent as `Authorization: Bearer` instead of a userKey.",
              body=tambo.TokenExchangeRequest,
              body_media_type="application/x-www-form-urlencoded", result=tambo.TokenResponse,
              errors=("VALIDATION_ERROR", "UNSUPPORTED_GRANT_TYPE", "TOKEN_EXCHANGE_DISABLED")),
    # component state
    Operation("GET", COMPONENT_STATE, "getComponentState", "A component's state and revision",
              "components", params=(*KEYS, Param("If-None-Match", "header", {"type": "string"},
                                                 "A revision ETag (`\"3\"`) the client has.")),
              result=tambo.ComponentStateResponse, headers={"ETag": "The revision (`\"3\"`)."},
              other={304: "The state is still at the revision `If-None-Match` names."},
              errors=("COMPONENT_NOT_FOUND", "USER_SCOPE_REQUIRED")),
    Operation("POST", COMPONENT_STATE, "updateComponentState",
              "Replace or patch (RFC 6902) a component's state", "components",
              body=tambo.ComponentStateUpdate,
              params=(*KEYS, Param("If-Match", "header", {"type": "string"},
                                   "Refuse the update unless the state is at this revision.")),
              result=tambo.ComponentStateResponse, headers={"ETag": "The new revision."},
              errors=("COMPONENT_NOT_FOUND", "USER_SCOPE_REQUIRED", "INVALID_JSON_PATCH", "JSON_PATCH_TEST_FAILED",
                      "STATE_UPDATE_CONFLICT", "REVISION_MISMATCH", "STATE_SCHEMA_VIOLATION",
                      "STATE_SCHEMA_TOO_COMPLEX", "STATE_TOO_LARGE")),
    # the operator console's API (admin keys only)
    Operation("GET", "/admin", "adminConsole", "The operator console (offline HTML; asks for an "
              "admin key)", "meta", public=True, result=str, media_type="text/html"),
    Operation("GET", "/v1/admin/threads", "adminListThreads", "Threads of every user scope, "
              "most recently updated first", "admin",
              description="Admin keys only (`gateway keys create --admin`): the threads of the "
                          "key's project across user scopes.",
              params=(ADMIN_USER, ADMIN_AGENT,
                      Param("status", "query", {"type": "string", "enum": ["idle", "running"]},
                            "`running`: a run is active or queued on it."),
                      *admin_window("updatedSince", "updatedUntil", "threads updated"),
                      limit(50, 200), CURSOR),
              result=AdminThreadList, errors=(*ADMIN_ERRORS, "INVALID_CURSOR")),
    Operation("GET", "/v1/admin/runs", "adminListRuns", "Runs of every user scope, newest first",
              "admin",
              description="Admin keys only: each run with its user scope, agent, key, times, "
                          "error and usage.",
              params=(ADMIN_USER, ADMIN_AGENT,
                      Param("status", "query", {"type": "string"},
                            "Comma-separated statuses (`queued`, `running`, `completed`, "
                            "`awaiting_input`, `failed`, `cancelled`)."),
                      Param("threadId", "query", {"type": "string"}, "Only this thread's."),
                      *admin_window("since", "until", "runs created"), limit(50, 200), CURSOR),
              result=AdminRunList, errors=(*ADMIN_ERRORS, "INVALID_CURSOR")),
    Operation("GET", "/v1/admin/runs/{run_id}", "adminGetRun", "One run with its error, time to "
              "first token and usage", "admin", result=AdminRunDetail,
              errors=(*ADMIN_ERRORS, "RUN_NOT_FOUND")),
    Operation("GET", "/v1/admin/runs/{run_id}/frames", "adminRunFrames", "A run's stored log "
              "(Timbal frames), a page at a time", "admin",
              params=(Param("after", "query", {"type": "integer", "minimum": 0},
                            "Frames after this position (`nextAfter` of the previous page)."),
                      limit(200, 1000)),
              result=AdminFrameList, errors=(*ADMIN_ERRORS, "RUN_NOT_FOUND")),
    Operation("GET", "/v1/admin/usage", "adminUsage", "Usage summed by key, user, agent, model "
              "or day", "admin",
              description="Admin keys only: tokens, calls, runs and cost of the key's project in "
                          "the window, grouped.",
              params=(Param("by", "query", {"type": "string", "enum": ["key", "user", "agent",
                                                                      "model", "day"],
                                            "default": "day"}, "The grouping."),
                      *admin_window("since", "until", "usage")),
              result=AdminUsageReport, errors=ADMIN_ERRORS),
    # voice input
    Operation("POST", "/audio/transcribe", "transcribeAudio", "Transcribe a recording (voice "
              "input)", "audio",
              description="Called by `useTamboVoice`. Answers with the transcript as plain "
                          "text, through litellm's transcription API and "
                          "`GATEWAY_TRANSCRIPTION_MODEL`.",
              body=tambo.TranscribeRequest, body_media_type="multipart/form-data", result=str,
              media_type="text/plain",
              errors=("UNSUPPORTED_MEDIA_TYPE", "TRANSCRIPTION_DISABLED", *METERED_ERRORS)),
)


def operation_keys(operations: tuple[Operation, ...]) -> set[tuple[str, str]]:
    return {(op.method, op.path) for op in operations}
