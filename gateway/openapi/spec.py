"""The API's own resources, as data: one `Operation` per route of `gateway/api/` (each
dialect declares its own in its `dialect.py`), read by the OpenAPI generator
(`openapi/document.py`) and the docs page. The types and the parameters many operations share
are `protocol/operations.py`'s.
"""

from __future__ import annotations

from typing import Any

from ..api.crons import CronCreate, CronList, CronOut
from ..dialects import registry
from ..protocol import tambo
from ..protocol.admin import (
    AdminAnswered,
    AdminAnswers,
    AdminConversation,
    AdminCronList,
    AdminFrameList,
    AdminKey,
    AdminKeyCreate,
    AdminKeyCreated,
    AdminKeyList,
    AdminModelList,
    AdminRunDetail,
    AdminRunList,
    AdminThreadList,
    AdminUsageReport,
    AdminWaitingList,
    AdminWebhookList,
)
from ..protocol.agents import AgentList
from ..protocol.operations import (
    BETA_AND_V1,
    COMPONENT_STATE,
    CURSOR,
    KEYS,
    METERED_ERRORS,
    RUN_ERRORS,
    STORED_CAPS,
    THREAD_FILTERS,
    Operation,
    Param,
    limit,
)

ADMIN_ERRORS = ("ADMIN_KEY_REQUIRED", "VALIDATION_ERROR")
ADMIN_USER = Param("userKey", "query", tambo.USER_KEY_SCHEMA,
                   "Only this user scope's (a userKey, or `oauth:...` of a signed-in user).")
ADMIN_AGENT = Param("agent", "query", {"type": "string", "maxLength": 64},
                    "Only this agent's.")


THREAD_SEARCH = (
    *THREAD_FILTERS,
    Param("count", "query", {"type": "boolean", "default": False},
          "Also answer how many threads match (`count`, counted up to 10,000; `countCapped`: "
          "there are more)."),
)


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
                      "SYSTEM_PROMPT_NOT_ALLOWED", "UNSUPPORTED_ATTACHMENT")),
    Operation("GET", "/v1/threads", "listThreads", "List threads, newest first", "threads",
              params=(*KEYS, limit(20, 100), CURSOR, *THREAD_SEARCH), result=tambo.ThreadList,
              description="The user scope's threads, narrowed by every filter given. "
                          "`metadata.<key>=<value>` (for example `metadata.project=x`) keeps "
                          "the threads whose metadata has that string value under that key "
                          "(at most 8 such filters; a key is 1 to 64 letters, digits, `_` or "
                          "`-`; a value at most 256 characters). A malformed filter is refused "
                          "(400), never ignored.",
              errors=("INVALID_CURSOR", "USER_SCOPE_REQUIRED", "VALIDATION_ERROR")),
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
                          "original is unchanged. It counts as a start against the key's runs "
                          "per minute, one more per 64 KiB it copies. Regenerate: fork at the message before an "
                          "answer, then run; edit: fork before a message, then run the new "
                          "text.",
              result=tambo.ThreadWithMessages,
              errors=("MESSAGE_NOT_FOUND", "INVALID_FORK_POINT", "USER_SCOPE_REQUIRED",
                      "THREAD_LIMIT_REACHED", "RATE_LIMITED", "QUOTAS_UNAVAILABLE")),
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
                      "STATE_SCHEMA_TOO_COMPLEX", "STATE_TOO_LARGE", "JSON_PATCH_TOO_LONG")),
    # schedules
    Operation("POST", "/v1/crons", "createCron", "Schedule runs", "crons",
              body=CronCreate, params=KEYS, status=201, result=CronOut,
              description="Each due time of `schedule` (a five-field cron expression in a time "
                          "zone, or `{\"every\": N}` seconds) starts one run of `agent` with "
                          "`message`, on a new thread of the user scope or on `threadId`, as "
                          "the caller that created it (its limits and quotas); exactly one "
                          "gateway process fires each due time. docs/crons.md.",
              errors=("USER_SCOPE_REQUIRED", "INVALID_SCHEDULE", "WEBHOOK_NOT_ALLOWED",
                      "METADATA_TOO_LARGE", "AGENT_NOT_FOUND", "AGENT_NOT_ALLOWED",
                      "THREAD_NOT_FOUND", "THREAD_AGENT_MISMATCH", "CRON_LIMIT_REACHED")),
    Operation("GET", "/v1/crons", "listCrons", "The user scope's schedules", "crons",
              params=(*KEYS, limit(100, 1000)), result=CronList,
              errors=("USER_SCOPE_REQUIRED",)),
    Operation("DELETE", "/v1/crons/{cron_id}", "deleteCron", "Delete a schedule", "crons",
              params=KEYS, status=204, errors=("USER_SCOPE_REQUIRED", "CRON_NOT_FOUND")),
    # the operator console's API (admin keys only)
    Operation("GET", "/admin", "adminConsole", "The operator console (offline HTML; asks for an "
              "admin key)", "meta", public=True, result=str, media_type="text/html"),
    Operation("GET", "/v1/admin/crons", "adminListCrons", "The project's schedules, of every "
              "user scope", "admin", params=(limit(200, 1000),), result=AdminCronList,
              description="Admin keys only: each schedule with its next due time and what its "
                          "last one did (the run it started, or why none).",
              errors=ADMIN_ERRORS),
    Operation("GET", "/v1/admin/webhooks", "adminListWebhooks", "Recent completion webhooks "
              "and their outcome", "admin", params=(limit(50, 200),), result=AdminWebhookList,
              description="Admin keys only: the project's most recent webhook deliveries, "
                          "newest first: delivered, failed for good or pending (attempts, the "
                          "receiver's last status). A URL is shown by its host only.",
              errors=ADMIN_ERRORS),
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
                          "the window, grouped; `format=csv` gives the CSV `gateway usage "
                          "--format csv` prints for the same window and grouping.",
              params=(Param("by", "query", {"type": "string", "enum": ["key", "user", "agent",
                                                                      "model", "day"],
                                            "default": "day"}, "The grouping."),
                      Param("format", "query", {"type": "string", "enum": ["json", "csv"],
                                                "default": "json"},
                            "`csv`: the groups as CSV (`text/csv`), a header first."),
                      *admin_window("since", "until", "usage")),
              result=AdminUsageReport, errors=ADMIN_ERRORS),
    Operation("GET", "/v1/admin/threads/{thread_id}/messages", "adminThreadMessages",
              "A thread's newest messages, rendered", "admin",
              description="Admin keys only: the thread's newest 200 messages as the client API "
                          "renders them, whatever its user scope.",
              result=AdminConversation, errors=ADMIN_ERRORS),
    Operation("GET", "/v1/admin/waiting", "adminWaiting", "Threads waiting for a human",
              "admin",
              description="Admin keys only: the project's paused threads (a server tool "
                          "waiting for approval, a tool's question, a client tool call "
                          "unanswered), most recently paused first, each with its calls.",
              params=(*admin_window("updatedSince", "updatedUntil", "threads paused"),
                      limit(50, 200), CURSOR),
              result=AdminWaitingList, errors=(*ADMIN_ERRORS, "INVALID_CURSOR")),
    Operation("POST", "/v1/admin/threads/{thread_id}/answers", "adminAnswer",
              "Answer a paused thread (approve, deny, answer)", "admin",
              description="Admin keys only: one tool result per pending call, as a client "
                          "would send them; the thread's next run starts with them and goes "
                          "on by itself (metered against the admin key).",
              body=AdminAnswers, status=202, result=AdminAnswered,
              errors=(*ADMIN_ERRORS, "THREAD_NOT_WAITING", *RUN_ERRORS, "OVERLOADED",
                      "TOO_MANY_CONCURRENT_RUNS", "RATE_LIMITED", "TOKEN_BUDGET_EXCEEDED",
                      "QUOTAS_UNAVAILABLE")),
    Operation("GET", "/v1/admin/keys", "adminListKeys", "The project's managed keys", "admin",
              description="An admin key only (also in development mode): each key's kind, "
                          "agent, state, limits and last use; never a key itself.",
              result=AdminKeyList, errors=ADMIN_ERRORS),
    Operation("POST", "/v1/admin/keys", "adminCreateKey", "Make a key of the project", "admin",
              description="An admin key only: a client key (with its limits and agent) or "
                          "another admin key, of the admin key's project. The key is in the "
                          "answer, once; only its SHA-256 is stored.",
              body=AdminKeyCreate, status=201, result=AdminKeyCreated,
              errors=(*ADMIN_ERRORS, "AGENT_NOT_FOUND")),
    Operation("POST", "/v1/admin/keys/{key_id}/revoke", "adminRevokeKey", "Revoke a key",
              "admin",
              description="An admin key only: refused at once by this process, within "
                          "`GATEWAY_KEY_CACHE_SECONDS` by the others. A key of another project "
                          "is not found.",
              result=AdminKey, errors=(*ADMIN_ERRORS, "KEY_NOT_FOUND")),
    Operation("GET", "/v1/admin/models", "adminModels", "The models and their prices", "admin",
              description="Admin keys only: each configured model and each one the project's "
                          "runs used, with its price per million tokens and where it comes "
                          "from (`GATEWAY_MODEL_PRICES`, litellm's map, or nowhere).",
              result=AdminModelList, errors=ADMIN_ERRORS),
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


def all_operations() -> tuple[Operation, ...]:
    """Every documented operation: the resources of `api/`, then each dialect's."""
    return OPERATIONS + registry.operations()
