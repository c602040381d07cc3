"""The catalogue of problems, and the error every layer raises to refuse a request with one.

Every stable `code` of a problem+json body the gateway sends is declared once here, with its HTTP
status and what it means; its title is derived from it. Call sites name a member
(`ApiError(Problem.THREAD_NOT_FOUND, ...)`), so a code cannot be sent with another status, and
the OpenAPI document (`openapi/document.py`) and `docs/errors.md` list exactly this catalogue
(`tests/unit/test_problems.py`). It lives in `protocol` because refusing a run is decided in
`runs` (atomically, with the lock) but answered by `api` as problem+json; both may import
`protocol`.
"""

from __future__ import annotations

import enum
from typing import Any


class Problem(enum.Enum):
    """A stable problem code (the member's name), with its HTTP status and description."""

    status: int
    description: str

    def __new__(cls, status: int, description: str) -> Problem:
        member = object.__new__(cls)
        member._value_ = len(cls.__members__) + 1  # distinct even when two texts are equal
        member.status, member.description = status, description
        return member

    @property
    def code(self) -> str:
        return self.name

    @property
    def momentary(self) -> bool:
        """A refusal of the moment, not of the request: the process drains or is overloaded, or
        its database or Redis is away (every 503). Work the gateway starts by itself (a Chorus
        message, a schedule's due time) waits and is tried again, instead of being dropped."""
        return self.status == 503

    @property
    def title(self) -> str:
        """The body's `title`: the code in words (`THREAD_NOT_FOUND` -> `Thread Not Found`)."""
        return self.name.replace("_", " ").title()

    VALIDATION_ERROR = (400, "A body field, query parameter or header is invalid; `errors` maps "
                             "each invalid field to its message.")
    INVALID_JSON = (400, "The request body is not valid JSON.")
    INVALID_CURSOR = (400, "The pagination cursor or event cursor is not valid.")
    INVALID_PREVIOUS_RUN = (400, "`previousRunId` is not the thread's last completed run (see "
                                 "`lastCompletedRunId`).")
    INVALID_TOOL_RESULT = (400, "The tool results do not answer exactly the pending tool calls "
                                "(`reason`: MISSING_RESULTS, EXTRA_RESULTS or DUPLICATE_RESULTS).")
    CHORUS_CHANNEL_UNAVAILABLE = (409, "A Chorus channel's thread id is held by a thread that is "
                                       "not this connection's own.")
    RESERVED_THREAD_ID = (400, "A thread id (or AG-UI thread name) a client chose starts like an "
                               "id the gateway mints (`thr_`, `run_`, `chorus_`, ...).")
    INVALID_JSON_PATCH = (400, "The JSON Patch is malformed or cannot be applied.")
    USER_SCOPE_REQUIRED = (400, "Listing or creating threads, and this call on a user's thread, "
                                "need a user scope: a `userKey` or a bearer token from "
                                "`/oauth/token`.")
    MODEL_NOT_ALLOWED = (400, "The request's `model` is not in the allow-list (`GATEWAY_MODELS`);"
                              " `allowedModels` lists it.")
    INVALID_ATTACHMENT = (400, "A `resource` block's `blob` is not valid base64.")
    UNSUPPORTED_ATTACHMENT = (400, "The model is known not to read this kind of attachment "
                                   "(images, or files such as PDFs).")
    TRANSCRIPTION_DISABLED = (400, "Voice input is off: `GATEWAY_TRANSCRIPTION_MODEL` is not set.")
    UNSUPPORTED_GRANT_TYPE = (400, "The token request is not an RFC 8693 token exchange.")
    TOKEN_EXCHANGE_DISABLED = (400, "No identity provider is configured for `/oauth/token`.")
    INVALID_FORK_POINT = (400, "The thread cannot be forked at this message: its history up to "
                               "there ends with tool calls that have no result yet "
                               "(`unansweredToolCallIds`).")
    UNKNOWN_RESOURCE = (400, "`embedResources`: a resource the message references is listed by "
                             "no MCP server of the agent (`uri`); the gateway reads only those.")
    TOO_MANY_RESOURCES = (400, "`embedResources`: the message references more resources than "
                               "`GATEWAY_MAX_EMBEDDED_RESOURCES`.")
    WEBHOOK_NOT_ALLOWED = (400, "A `webhook` URL the gateway may not call: webhooks are off "
                                "(`GATEWAY_WEBHOOK_SECRET` unset), or its host is not in "
                                "`GATEWAY_WEBHOOK_ALLOWED_HOSTS`.")
    INVALID_SCHEDULE = (400, "A schedule's `schedule` is neither a five-field cron expression "
                             "in a known time zone that fires, nor `{\"every\": N}` with N at "
                             "least `GATEWAY_CRON_MIN_INTERVAL_SECONDS`.")
    UNAUTHORIZED = (401, "Missing or unknown API key (`x-api-key` or a bearer token).")
    INVALID_TOKEN = (401, "A bearer or subject token that is not valid (signature, issuer, "
                          "audience, or another project).")
    TOKEN_EXPIRED = (401, "A bearer or subject token that has expired; exchange a fresh one.")
    LOOPBACK_ONLY = (403, "Development mode (no API keys) answers this machine only: the client "
                          "address, `Host` or `Origin` is not loopback.")
    ADMIN_KEY_REQUIRED = (403, "The operator API (`/v1/admin/...`) answers admin keys only "
                               "(`gateway keys create --admin`); this key is not one.")
    ADMIN_KEY_NOT_ALLOWED = (403, "An admin key is for the operator console and `/v1/admin/...` "
                                  "only: it cannot run agents or read threads as a client.")
    AGENT_NOT_ALLOWED = (403, "The API key is bound to one agent (`gateway keys create --agent`,"
                              " `agent`): it runs only that agent and that agent's threads.")
    NOT_FOUND = (404, "No route matches the path (for example an empty or slash-containing id).")
    THREAD_NOT_FOUND = (404, "No such thread in the caller's project (or it belongs to another "
                             "userKey).")
    MESSAGE_NOT_FOUND = (404, "No such message in the thread.")
    RUN_NOT_FOUND = (404, "No such run in the thread.")
    COMPONENT_NOT_FOUND = (404, "No such component in the thread.")
    CHORUS_CONNECTION_NOT_FOUND = (404, "No such Chorus connection string, or it was revoked "
                                        "(`gateway chorus revoke`).")
    CRON_NOT_FOUND = (404, "No such schedule in the caller's project and user scope.")
    KEY_NOT_FOUND = (404, "No such managed key in the admin key's project (`GET "
                          "/v1/admin/keys` lists them).")
    THREAD_NOT_WAITING = (409, "The thread is not paused for an answer (no pending approval, "
                               "question or client tool call): it was answered, ended or never "
                               "paused.")
    METHOD_NOT_ALLOWED = (405, "The path exists but not with this method; see the `Allow` header.")
    NO_NEW_INPUT = (400, "An AG-UI input with nothing new for the thread: no closing user message"
                         " and no answer to its pending tool calls.")
    AGENT_NOT_FOUND = (404, "No such agent (`GET /v1/agents` lists them); also a thread or API "
                            "key whose agent is no longer configured.")
    SYSTEM_PROMPT_NOT_ALLOWED = (400, "The request carries a `system` or `developer` message and "
                                      "the agent does not allow client system prompts "
                                      "(`allow_client_system_prompt`).")
    MESSAGE_TOO_LARGE_FOR_MODEL = (400, "The message alone (with the agent's instructions) has "
                                        "more tokens than the model's input budget "
                                        "(`budgetTokens`; docs/context.md): no history could "
                                        "make room for it.")
    THREAD_AGENT_MISMATCH = (409, "The thread runs another agent (`agent`): a thread keeps the "
                                  "agent of its first run.")
    RUN_ID_IN_USE = (409, "The `runId` names a run of another thread.")
    CONCURRENT_RUN = (409, "A run is already active on the thread (`currentRunId`).")
    IDEMPOTENCY_KEY_IN_USE = (409, "A request with this Idempotency-Key is still being processed;"
                                   " retry later.")
    JSON_PATCH_TEST_FAILED = (409, "A `test` operation of the patch failed.")
    STATE_UPDATE_CONFLICT = (409, "The component state is contended; retry.")
    THREAD_EXISTS = (409, "A thread with this client-chosen id exists, created with another "
                          "request (Timbal `POST /v1/timbal/threads/{threadId}`) or by someone "
                          "else: choose another id.")
    CRON_LIMIT_REACHED = (409, "The project has `GATEWAY_MAX_CRONS_PER_PROJECT` schedules "
                               "already; delete one first.")
    REVISION_MISMATCH = (412, "`If-Match` names a revision that is not the current one.")
    PAYLOAD_TOO_LARGE = (413, "The request body is larger than `GATEWAY_MAX_BODY_BYTES` (default "
                              "10 MiB).")
    ATTACHMENT_TOO_LARGE = (413, "An attachment is larger than `GATEWAY_MAX_ATTACHMENT_BYTES`.")
    MESSAGE_TOO_LARGE = (413, "The message's text is longer than `GATEWAY_MAX_MESSAGE_CHARS`.")
    SCHEMA_TOO_LARGE = (413, "A tool's or component's schemas are larger than "
                             "`GATEWAY_MAX_SCHEMA_BYTES`.")
    TOO_MANY_TOOLS = (400, "The request declares more tools than `GATEWAY_MAX_TOOLS`.")
    TOO_MANY_COMPONENTS = (400, "The request declares more components than "
                                "`GATEWAY_MAX_COMPONENTS`.")
    JSON_TOO_DEEP = (400, "The body nests arrays and objects deeper than "
                          "`GATEWAY_MAX_JSON_DEPTH`.")
    INTEGER_OUT_OF_RANGE = (400, "The body holds an integer outside the signed 64-bit range, "
                                 "which the gateway cannot store or pass to a model.")
    NUMBER_OUT_OF_RANGE = (400, "The body holds a number beyond the range of a double (such as "
                                "`1e400`), which the gateway cannot store or pass to a model.")
    NUL_CHARACTER = (400, "A string in the body, or a `userKey`/`contextKey`, holds a NUL "
                          "character (U+0000), which the gateway cannot store.")
    METADATA_TOO_LARGE = (413, "A thread's or run's metadata is larger than "
                               "`GATEWAY_MAX_METADATA_BYTES`.")
    JSON_PATCH_TOO_LONG = (413, "A JSON Patch has more operations than the gateway applies in "
                                "one update (`limit`).")
    STATE_TOO_LARGE = (413, "A component's state, or a thread's shared state (AG-UI `state`), "
                            "is larger than `GATEWAY_MAX_COMPONENT_STATE_BYTES`.")
    RESOURCE_TOO_LARGE = (413, "`embedResources`: a referenced resource's contents are larger "
                               "than `GATEWAY_MAX_ATTACHMENT_BYTES` (`uri`).")
    TOO_MANY_INITIAL_MESSAGES = (400, "A new thread is seeded with more messages than "
                                      "`GATEWAY_MAX_INITIAL_MESSAGES`.")
    THREAD_LIMIT_REACHED = (403, "The user scope (or project) holds `GATEWAY_MAX_THREADS_PER_USER`"
                                 " (or `_PER_PROJECT`) threads; delete some first (`limitScope`: "
                                 "user or project).")
    IMAGE_URL_NOT_ALLOWED = (400, "An image is attached by URL; this gateway takes images as data "
                                  "only (`GATEWAY_IMAGE_URLS`).")
    CHORUS_URL_NOT_ALLOWED = (400, "A Chorus message's `callback` or `mcp` URL is not one the "
                                   "gateway may call (`GATEWAY_CHORUS_ALLOWED_HOSTS`: its host, "
                                   "and the addresses it resolves to).")
    UNSUPPORTED_SCHEMA_PATTERN = (400, "A component's `stateSchema` holds a pattern the "
                                       "linear-time regex engine (RE2) cannot run: "
                                       "backreferences or lookaround.")
    UNSUPPORTED_SCHEMA_REF = (400, "A component's `stateSchema` has a `$ref` outside itself; only "
                                   "local references (`#...`) resolve.")
    UNSUPPORTED_SCHEMA_KEYWORD = (400, "A component's `stateSchema` combines "
                                       "`unevaluatedProperties` with `patternProperties`.")
    STATE_SCHEMA_TOO_COMPLEX = (422, "Checking the state against the component's `stateSchema` "
                                     "needs more work than one update may take (see "
                                     "docs/security.md).")
    RATE_LIMITED = (429, "The API key, user or Chorus connection string started its runs per "
                         "minute; retry after `Retry-After` seconds (`limitScope`: apiKey, "
                         "user or chorus).")
    TOO_MANY_CONCURRENT_RUNS = (429, "The API key, user or Chorus connection string has its "
                                     "limit of runs going at once; retry after `Retry-After` "
                                     "seconds or when one ends.")
    TOKEN_BUDGET_EXCEEDED = (429, "The API key's (or Chorus connection string's) daily token "
                                  "budget is spent; `Retry-After` says when the UTC day ends.")
    TOO_MANY_KEY_LOOKUPS = (429, "This client address presented more unknown API keys than "
                                 "`GATEWAY_FAILED_KEY_LOOKUPS_PER_MINUTE`; retry after "
                                 "`Retry-After` seconds.")
    IDEMPOTENCY_KEY_REUSED = (422, "This Idempotency-Key was already used with a different "
                                   "request (body or user).")
    STATE_SCHEMA_VIOLATION = (422, "The new state does not match the component's `stateSchema`.")
    UNSUPPORTED_MEDIA_TYPE = (415, "The body's media type is not one this operation takes.")
    INTERNAL_ERROR = (500, "An unexpected error; the body carries an incident id, never a trace.")
    LLM_ERROR = (502, "The model provider failed (one-shot model calls).")
    LLM_CLIENT_ERROR = (502, "The model provider refused the request.")
    LLM_SERVER_ERROR = (502, "The model provider had a temporary error.")
    LLM_RATE_LIMITED = (502, "The model provider rate-limited the gateway.")
    LLM_AUTHENTICATION_ERROR = (502, "The model provider rejected the gateway's credentials.")
    LLM_TIMEOUT = (502, "The model provider did not answer in time.")
    LLM_CONTEXT_WINDOW_EXCEEDED = (502, "The thread is too long for the model.")
    LLM_STREAM_INCOMPLETE = (502, "The model's answer ended before the provider said it was "
                                  "complete (no finish reason, or no end of stream: an error "
                                  "after `200 OK`, or a server that cut the answer to serve "
                                  "another request); retryable. The provider's words, if any, "
                                  "are in the gateway's log.")
    TOOL_ARGUMENTS_INVALID = (502, "The model called a tool with arguments that are cut off or do "
                                   "not match the tool's schema, again after it was told so "
                                   "once in the same run; retryable.")
    DATABASE_UNAVAILABLE = (503, "The gateway cannot reach its database for a moment (a restart, "
                                 "a network blip); retry shortly.")
    REDIS_UNAVAILABLE = (503, "Redis (`GATEWAY_REDIS_URL`) does not answer; the process should "
                              "get no traffic until it does.")
    QUOTAS_UNAVAILABLE = (503, "The key's quotas cannot be checked: Redis does not answer and "
                               "`GATEWAY_QUOTA_OUTAGE` is `refuse`; retry shortly.")
    LLM_UNREACHABLE = (502, "The gateway cannot connect to the model provider (connection "
                            "refused, unknown host, connect timeout).")
    RESOURCE_UNAVAILABLE = (502, "`embedResources`: the MCP server failed to read a referenced "
                                 "resource, or took too long (`uri`).")
    SHUTTING_DOWN = (503, "The gateway is shutting down and starts no new run; retry after "
                          "`Retry-After` seconds (another process may take it).")
    OVERLOADED = (503, "This gateway process is busy (a run start taking "
                       "`GATEWAY_MAX_START_WAIT_SECONDS`, its event loop "
                       "`GATEWAY_MAX_LOOP_LAG_SECONDS` late or using `GATEWAY_MAX_LOOP_CPU` of "
                       "its core, or the operator's cap `GATEWAY_MAX_ACTIVE_RUNS` reached) and "
                       "starts no new run now; retry after `Retry-After` seconds (another "
                       "process may take it; `reason` says which limit).")


# The catalogue by code, for what reads codes as strings (the OpenAPI generator, the docs test).
CATALOGUE: dict[str, Problem] = {problem.name: problem for problem in Problem}


class ApiError(Exception):
    """A refusal before any stream starts: answered as problem+json (`api/errors.py`) with the
    problem's status and code, `detail` and any `extra` fields."""

    def __init__(self, problem: Problem, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.problem, self.detail, self.extra = problem, detail, extra
        self.status, self.code = problem.status, problem.name


# The most of a client's value (an id from the path) an error body repeats: every id the
# gateway makes or keeps is shorter, so an id that could exist is repeated whole.
ECHO_CHARS = 100


def echo(value: str) -> str:
    """`value` as an error may repeat it: whole up to `ECHO_CHARS`, else cut there and marked
    with `...`. A path can hold kilobytes, and an error body never carries unbounded client
    input."""
    return value if len(value) <= ECHO_CHARS else value[:ECHO_CHARS] + "..."


class InvalidRequest(Exception):
    """A request body that does not fit its model (answered 400 VALIDATION_ERROR).

    Wrapped so that only the request's own validation is answered 400: a pydantic error from
    anywhere else (a response model the server filled wrongly) is the server's bug, a 500.
    """

    def __init__(self, error: Any) -> None:  # a pydantic ValidationError
        super().__init__(str(error))
        self.error = error

