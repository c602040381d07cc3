"""The operator API's bodies (`/v1/admin/...`): threads and runs across user scopes, a run's
stored frames and error, and usage sums. Times are ISO-8601 (UTC, milliseconds), durations
milliseconds. Nothing here carries key material or a model's credentials: keys appear by id."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .tambo import StrictModel, omitted


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


class AdminThread(StrictModel):
    id: str
    name: str | None
    userKey: str | None = Field(description="The thread's user scope (a userKey, or "
                                            "`oauth:...` for a signed-in user); null: none.")
    agent: str = Field(description="The agent its runs use.")
    status: Literal["idle", "running"] = Field(description="`running`: a run is active or "
                                                           "queued on it.")
    currentRunId: str | None
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
    by: Literal["key", "user", "agent", "model", "day"]
    since: str
    until: str
    groups: list[AdminUsageGroup]
    total: AdminUsage
