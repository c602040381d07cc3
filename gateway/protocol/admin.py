"""The operator API's bodies (`/v1/admin/...`): threads and runs across user scopes, a run's
stored frames and error, and usage sums. Times are ISO-8601 (UTC, milliseconds), durations
milliseconds. Nothing here carries key material or a model's credentials: keys appear by id."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .tambo import Message, StrictModel, omitted


class AdminUsage(StrictModel):
    """Tokens summed over a run's (or a group's) models. `costUsd` sums the priced rows;
    `unpriced` counts the run-model rows litellm's price map did not know (their cost is not
    in `costUsd`)."""

    calls: int = Field(ge=0)
    inputTokens: int = Field(ge=0)
    outputTokens: int = Field(ge=0)
    totalTokens: int = Field(ge=0)
    reasoningTokens: int = Field(ge=0)
    cachedInputTokens: int = Field(ge=0)
    costUsd: float | None
    unpriced: int = Field(ge=0)
    estimatedCalls: int = Field(0, ge=0, description="Of `calls`, those cut off before the "
                                                     "provider reported their usage: their "
                                                     "tokens and cost are the gateway's "
                                                     "estimate.")


class AdminThread(StrictModel):
    id: str
    name: str | None
    userKey: str | None = Field(description="The thread's user scope (a userKey, or "
                                            "`oauth:...` for a signed-in user); null: none.")
    agent: str = Field(description="The agent its runs use.")
    status: Literal["idle", "running"] = Field(description="`running`: a run is active or "
                                                           "queued on it.")
    currentRunId: str | None
    waiting: bool = Field(False, description="Its last run paused for an answer (an "
                                              "approval, a question, a client tool): listed "
                                              "in `GET /v1/admin/waiting`.")
    lastRunError: dict[str, Any] | None = Field(description="`{code, message}` of its last "
                                                            "run, when that run failed.")
    createdAt: str
    updatedAt: str


class AdminThreadList(StrictModel):
    threads: list[AdminThread]
    hasMore: bool
    nextCursor: str | None = omitted()


class AdminRunError(StrictModel):
    code: str | None
    message: str
    category: str | None = omitted()


class AdminRun(StrictModel):
    id: str
    threadId: str
    userKey: str | None
    agent: str
    model: str | None
    status: Literal["queued", "running", "completed", "awaiting_input", "failed", "cancelled"]
    apiKeyId: str | None = Field(description="The id of the key that started it (from its "
                                             "usage; null in development mode or before its "
                                             "first model call ended).")
    createdAt: str
    startedAt: str | None
    finishedAt: str | None
    durationMs: int | None = Field(description="From start to end (null while it runs).")
    queuedMs: int | None = Field(description="From creation to start.")
    error: AdminRunError | None
    usage: AdminUsage | None = Field(description="Null: no model call was metered.")


class AdminRunList(StrictModel):
    runs: list[AdminRun]
    hasMore: bool
    nextCursor: str | None = omitted()


class AdminRunDetail(AdminRun):
    firstTokenMs: int | None = Field(description="From start to its first streamed token "
                                                 "(the run list's `firstTokenAt`); null until "
                                                 "the run ends, or when nothing streamed.")
    frames: int = Field(ge=0, description="How many frames its stored log holds so far.")


class AdminFrame(StrictModel):
    seq: int = Field(ge=1, description="Its position in the run's log.")
    at: str = Field(description="When it was written.")
    frame: dict[str, Any] = Field(description="The Timbal frame (schema `TimbalFrame`).")


class AdminFrameList(StrictModel):
    frames: list[AdminFrame]
    hasMore: bool
    nextAfter: int | None = omitted()


class AdminUsageGroup(AdminUsage):
    name: str | None = Field(description="The key id, user scope, agent, model, or day "
                                         "(`YYYY-MM-DD`, UTC); null: none (a run of "
                                         "development mode has no key).")
    runs: int = Field(ge=0)


class AdminUsageReport(StrictModel):
    project: str = Field(description="The admin key's project, whose usage this is "
                                     "(`gateway usage --project`).")
    by: Literal["key", "user", "agent", "model", "day"]
    since: str
    until: str
    groups: list[AdminUsageGroup]
    total: AdminUsage


# -- keys -----------------------------------------------------------------------------------------

KeyLimit = int | None


class AdminKey(StrictModel):
    """A managed key of the project, as `gateway keys list` shows it: never the key itself."""

    id: str
    prefix: str = Field(description="The key's first characters, to tell keys apart.")
    kind: Literal["client", "admin"]
    agent: str | None = Field(description="The agent its Tambo runs use (null: the default).")
    state: Literal["active", "expired", "revoked"]
    createdAt: str
    expiresAt: str | None
    revokedAt: str | None
    lastUsedAt: str | None = Field(description="When a request last came with it (to the "
                                               "minute; null: never).")
    maxConcurrentRuns: KeyLimit = Field(description="Its own limit (null: the setting's; 0: "
                                                    "none).")
    runsPerMinute: KeyLimit
    dailyTokens: KeyLimit


class AdminKeyDefaults(StrictModel):
    """The limits a key without its own gets (`GATEWAY_KEY_*`; 0: none)."""

    maxConcurrentRuns: int
    runsPerMinute: int
    dailyTokens: int


class AdminKeyList(StrictModel):
    keys: list[AdminKey]
    defaults: AdminKeyDefaults
    agents: list[str] = Field(description="The agents a new client key may be bound to.")


class AdminKeyCreate(StrictModel):
    """A new key of the admin's project."""

    admin: bool = Field(False, description="An operator's key (the console only) instead of a "
                                           "client key.")
    agent: str | None = Field(None, max_length=64, description="The agent its runs use, and "
                                                               "the only one (a client key).")
    expiresAt: str | None = Field(None, max_length=40, description="ISO-8601; null: never.")
    maxConcurrentRuns: int | None = Field(None, ge=0, le=1_000_000)
    runsPerMinute: int | None = Field(None, ge=0, le=1_000_000)
    dailyTokens: int | None = Field(None, ge=0, le=10**15)


class AdminKeyCreated(AdminKey):
    key: str = Field(description="The key itself: shown this once, never stored (only its "
                                 "SHA-256 is).")


# -- threads waiting for a human ------------------------------------------------------------------

class AdminPendingCall(StrictModel):
    """A call a paused run waits on: a server tool waiting for approval, a tool's question, or
    a client tool the app has not answered."""

    toolCallId: str
    toolName: str
    arguments: str = Field(description="The call's arguments (JSON text).")
    kind: Literal["approval", "question", "clientTool"]
    message: str | None = Field(description="What an approval or a question asks.")
    responseSchema: dict[str, Any] | None = Field(description="The answer's JSON Schema.")
    expiresAt: str | None = Field(description="An approval given later is refused.")
    expired: bool
    rule: str | None = Field(None, exclude_if=lambda v: v is None, description=(
        "The operator's rule on the arguments that made this call ask (an agent's "
        "`approval_rules`, or `python:<name>` for a tool's predicate); absent: the tool asks "
        "for every call."))


class AdminWaitingThread(StrictModel):
    id: str
    name: str | None
    userKey: str | None
    agent: str
    runId: str | None = Field(description="The paused run.")
    updatedAt: str
    calls: list[AdminPendingCall]


class AdminWaitingList(StrictModel):
    threads: list[AdminWaitingThread]
    hasMore: bool
    nextCursor: str | None = omitted()


class AdminAnswer(StrictModel):
    """The answer to one pending call, as a client's tool result: an approval's
    `{"approved": true}` or `{"approved": false, "reason": "..."}`, a question's answer (an
    object, or `{"action": "decline"}`), or a client tool's result."""

    toolCallId: str = Field(max_length=128)
    result: Any = Field(description="JSON; a string is sent as the result's text.")
    isError: bool = False


class AdminAnswers(StrictModel):
    answers: list[AdminAnswer] = Field(min_length=1, max_length=128,
                                       description="One per pending call of the pause.")


class AdminAnswered(StrictModel):
    threadId: str
    runId: str = Field(description="The run the answers started (it runs on its own; follow "
                                   "it in Runs or with the client API).")
    status: str


# -- a thread's conversation ----------------------------------------------------------------------

class AdminConversation(StrictModel):
    """A thread's messages as the client API renders them (`GET /v1/threads/{id}`), for the
    console's rendered conversation beside a run's log."""

    id: str
    name: str | None
    userKey: str | None
    agent: str
    messages: list[Message]
    hasMore: bool = Field(description="Older messages were left out (the newest are shown).")


# -- models and prices ----------------------------------------------------------------------------

class AdminModelPrice(StrictModel):
    """A model of this gateway (configured, or seen in the project's usage) and its price."""

    model: str
    source: Literal["litellm", "setting", "none"] = Field(
        description="Where its price comes from: litellm's price map, `GATEWAY_MODEL_PRICES`, "
                    "or nowhere (its cost is unknown).")
    inputPerMillion: float | None = Field(description="USD per million input tokens.")
    outputPerMillion: float | None
    cachedInputPerMillion: float | None
    configured: bool = Field(description="It is GATEWAY_MODEL, in GATEWAY_MODELS, or an "
                                         "agent's or a fallback's.")


class AdminModelList(StrictModel):
    models: list[AdminModelPrice]


class AdminCron(StrictModel):
    """A schedule of the project (any user scope), with what its last due time did."""

    id: str
    userKey: str
    agent: str | None
    threadId: str | None
    schedule: dict[str, Any] = Field(description="`{cron, timezone}` or `{every}` (seconds).")
    message: str
    webhookHost: str | None = Field(description="The host its runs' ends are POSTed to (the "
                                                "URL's path and query are not shown).")
    createdAt: str
    nextRunAt: str | None
    lastRunId: str | None
    lastError: str | None = Field(description="Why the last due time started no run (a "
                                              "problem code, or OWNER_KEY_REVOKED).")
    runsStarted: int


class AdminCronList(StrictModel):
    crons: list[AdminCron]


class AdminWebhookDelivery(StrictModel):
    """A run's completion webhook, newest first: delivered, failed for good, or pending."""

    runId: str
    threadId: str
    host: str = Field(description="The receiver's host (the URL's path and query are not "
                                  "shown: they may carry a token).")
    state: Literal["pending", "delivered", "failed"]
    attempts: int
    lastStatus: int | None = Field(description="The receiver's last HTTP status.")
    lastError: str | None = Field(description="Why the last attempt failed, if it did.")
    createdAt: str
    doneAt: str | None
    nextAttemptAt: str | None = Field(description="When a pending one is tried next.")


class AdminWebhookList(StrictModel):
    deliveries: list[AdminWebhookDelivery]


# -- usage as text: the console's CSV and `gateway usage` -----------------------------------------

USAGE_COLUMNS = (("runs", "runs"), ("calls", "calls"), ("input", "inputTokens"),
                 ("output", "outputTokens"), ("reasoning", "reasoningTokens"),
                 ("cached", "cachedInputTokens"))


def usage_cells(by: str, groups: list[dict[str, Any]]) -> list[list[str]]:
    """The usage report as rows of text cells, a header first: `by`, runs, calls, input,
    output, reasoning, cached, cost_usd, unpriced, estimated (calls whose usage is the
    gateway's estimate). The console's CSV and `gateway usage`'s
    table are made of these, so the two always say the same (a group without a value, such
    as development mode's key, is `-`; a cost nobody knows is `-`)."""
    rows = [[by, *(name for name, _ in USAGE_COLUMNS), "cost_usd", "unpriced", "estimated"]]
    for group in groups:
        cost = group.get("costUsd")
        rows.append([str(group.get("name") or "-"),
                     *(str(group.get(key, "")) for _, key in USAGE_COLUMNS),
                     "-" if cost is None else f"{cost:.6f}", str(group.get("unpriced", 0)),
                     str(group.get("estimatedCalls", 0))])
    return rows


def usage_csv(by: str, groups: list[dict[str, Any]]) -> str:
    """`usage_cells` as CSV (RFC 4180: a cell with a comma, quote or line break quoted)."""
    def cell(text: str) -> str:
        if any(c in text for c in ',"\r\n'):
            return '"' + text.replace('"', '""') + '"'
        return text

    return "".join(",".join(cell(c) for c in row) + "\r\n" for row in usage_cells(by, groups))
