"""The tables. Timestamps are integer epoch milliseconds: exact, sortable, and the same on
SQLite and PostgreSQL; the REST layer formats them as ISO-8601.

A Tambo message (one user input, or one model turn's output) is one `messages` row; its `parts`
are the Timbal message values it is made of (`user`, `agent`, `thinking`, `tool_call`,
`tool_result`, `x-component`), in order. The REST view and the model's history are both built
from those values.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Float, Index, Integer, UniqueConstraint
from sqlmodel import Field, SQLModel


def _json(nullable: bool = True) -> Any:
    return Field(default=None, sa_column=Column(JSON, nullable=nullable))


class ThreadRow(SQLModel, table=True):
    __tablename__ = "threads"
    __table_args__ = (
        Index("ix_threads_project_user_created", "project_id", "user_key", "created_ms"),
        Index("ix_threads_updated", "updated_ms"),
        Index("ix_threads_project_updated", "project_id", "updated_ms"),  # the admin listing
        UniqueConstraint("project_id", "client_id", name="uq_threads_project_client_id"),
    )

    id: str = Field(primary_key=True, max_length=64)
    project_id: str = Field(max_length=128)
    # The id an AG-UI client chose for the thread (its `threadId`): a name within the project,
    # never the gateway's own id, so two projects choosing the same one never meet.
    client_id: str | None = Field(default=None, max_length=64)
    user_key: str | None = Field(default=None, max_length=512)
    name: str | None = Field(default=None, max_length=500)
    meta: dict[str, Any] | None = Field(default=None, sa_column=Column("metadata", JSON))
    created_ms: int = Field(sa_column=Column(BigInteger, nullable=False))
    updated_ms: int = Field(sa_column=Column(BigInteger, nullable=False))
    # The run lock: `idle` means free; taken by one atomic UPDATE ... WHERE run_status = 'idle'.
    run_status: str = Field(default="idle", max_length=16)
    current_run_id: str | None = Field(default=None, max_length=64)
    last_completed_run_id: str | None = Field(default=None, max_length=64)
    last_run_cancelled: bool = False
    last_run_error: dict[str, Any] | None = _json()
    # [{toolCallId, toolName, arguments}] of client tool calls awaiting results.
    pending_tool_calls: list[dict[str, Any]] | None = _json()
    # The agent its runs use: chosen by its first run, kept for every later one (None: a
    # thread from before agents, which runs the default agent).
    agent: str | None = Field(default=None, max_length=64)
    # A fork's origin (`POST /v1/threads/{id}/fork`): the thread and the message its history
    # was copied up to. Kept as written: the original may be deleted later.
    forked_from_thread_id: str | None = Field(default=None, max_length=64)
    forked_from_message_id: str | None = Field(default=None, max_length=64)
    # What its last run sent the model (docs/context.md): the counted input tokens (None: no
    # budget applied), whether older turns were left out, and the summary standing in for
    # them: {"text", "through": the seq of the last message it covers, "messageId"}.
    context_tokens: int | None = None
    context_trimmed: bool = False
    context_summary: dict[str, Any] | None = _json()
    # A thread created with a client-chosen id (`POST /v1/timbal/threads/{id}`): the SHA-256 of
    # that request (body and user scope), so the same create again is told from a conflicting
    # one without keeping the body (it may carry credentials).
    create_fingerprint: str | None = Field(default=None, max_length=64)
    # The shared agent state (AG-UI `state`): the client's, as its last run sent it, or as a
    # server tool changed it since (`runs/components/thread_state.py`).
    state: dict[str, Any] | None = _json()


class MessageRow(SQLModel, table=True):
    __tablename__ = "messages"
    __table_args__ = (Index("ix_messages_thread_seq", "thread_id", "seq"),)

    seq: int | None = Field(default=None, sa_column=Column(Integer, primary_key=True, autoincrement=True))
    id: str = Field(max_length=64, unique=True)
    thread_id: str = Field(max_length=64)
    run_id: str | None = Field(default=None, max_length=64)
    role: str = Field(max_length=16)
    parts: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    meta: dict[str, Any] | None = Field(default=None, sa_column=Column("metadata", JSON))
    created_ms: int = Field(sa_column=Column(BigInteger, nullable=False))
    is_cancelled: bool = False


class RunRow(SQLModel, table=True):
    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_thread_created", "thread_id", "created_ms"),
        Index("ix_runs_status_lease", "status", "lease_expires_ms"),
        Index("ix_runs_project_created", "project_id", "created_ms"),  # the admin listing
        UniqueConstraint("thread_id", "idempotency_key", name="uq_runs_thread_idempotency"),
        UniqueConstraint("project_id", "client_id", name="uq_runs_project_client_id"),
    )

    id: str = Field(primary_key=True, max_length=64)
    # The id an AG-UI client chose for the run (its `runId`), unique within the project.
    client_id: str | None = Field(default=None, max_length=64)
    thread_id: str = Field(max_length=64)
    project_id: str = Field(max_length=128)
    # queued -> running -> completed | awaiting_input | failed | cancelled
    status: str = Field(default="queued", max_length=16)
    previous_run_id: str | None = Field(default=None, max_length=64)
    created_ms: int = Field(sa_column=Column(BigInteger, nullable=False))
    started_ms: int | None = Field(default=None, sa_column=Column(BigInteger))
    finished_ms: int | None = Field(default=None, sa_column=Column(BigInteger))
    error: dict[str, Any] | None = _json()
    pending_tool_calls: list[dict[str, Any]] | None = _json()
    request: dict[str, Any] | None = _json()
    idempotency_key: str | None = Field(default=None, max_length=255)
    on_disconnect: str = Field(default="grace", max_length=16)
    lease_owner: str | None = Field(default=None, max_length=128)
    lease_expires_ms: int | None = Field(default=None, sa_column=Column(BigInteger))
    # Set by a cancel that reached a process which does not own the run; the owner polls it.
    cancel_requested_ms: int | None = Field(default=None, sa_column=Column(BigInteger))
    # Last time a follower in another process read the run's log (the disconnect grace
    # policy must not cancel a run someone is still watching through another process).
    watched_ms: int | None = Field(default=None, sa_column=Column(BigInteger))
    # The model the run calls, written with the run; replaced by the one that answered when a
    # fallback of a list did.
    model: str | None = Field(default=None, max_length=255)
    # When the run's first streamed token (a delta of text, reasoning, tool arguments or
    # component props) reached its log; written with its end, null for a run that streamed none.
    first_token_ms: int | None = Field(default=None, sa_column=Column(BigInteger))


class RunFrameRow(SQLModel, table=True):
    """The run's log: one row per Timbal frame, written in batches, never one per token."""

    __tablename__ = "run_frames"

    run_id: str = Field(primary_key=True, max_length=64)
    seq: int = Field(primary_key=True)
    ts_ms: int = Field(sa_column=Column(BigInteger, nullable=False))
    frame: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))


class IdempotencyKeyRow(SQLModel, table=True):
    """An `Idempotency-Key` of a new-thread run (`POST /v1/threads/runs`), claimed per project.

    The primary key makes the claim atomic: of two racing requests with one key, one inserts
    and creates the thread and run; the other finds the claim and attaches to that run.
    (Runs on an existing thread use `uq_runs_thread_idempotency` instead.)
    """

    __tablename__ = "idempotency_keys"

    project_id: str = Field(primary_key=True, max_length=128)
    key: str = Field(primary_key=True, max_length=255)
    thread_id: str | None = Field(default=None, max_length=64)
    run_id: str | None = Field(default=None, max_length=64)
    created_ms: int = Field(sa_column=Column(BigInteger, nullable=False))


class ComponentRow(SQLModel, table=True):
    """A rendered component instance; its state lives here so updates need not rewrite messages."""

    __tablename__ = "components"

    id: str = Field(primary_key=True, max_length=64)
    thread_id: str = Field(max_length=64, index=True)
    message_id: str = Field(max_length=64)
    name: str = Field(max_length=200)
    props: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    state: dict[str, Any] | None = _json()
    state_schema: dict[str, Any] | None = _json()
    revision: int = 0
    updated_ms: int = Field(sa_column=Column(BigInteger, nullable=False))
    # The `seq` of the thread's newest message when this state was written (None: written
    # before any was known, as a fork's copy): what `ComponentStateHistoryRow` keys on.
    message_seq: int | None = Field(default=None, sa_column=Column(BigInteger))


class ComponentStateHistoryRow(SQLModel, table=True):
    """A component's state as it was when a later message arrived: kept so a fork at an
    earlier message copies the state as of that message (`runs/admission/forks.py`).

    Written only when a state update is the first since a new message on the thread (the state
    it replaces was the thread's state as of that message), so a component has at most one row
    per message of its thread, however often its state changes in between.
    """

    __tablename__ = "component_state_history"
    __table_args__ = (Index("ix_component_state_history_thread", "thread_id"),)

    component_id: str = Field(primary_key=True, max_length=64)
    revision: int = Field(primary_key=True)
    thread_id: str = Field(max_length=64)
    state: dict[str, Any] | None = _json()
    # The state's `ComponentRow.message_seq`: it held from that message until a later one.
    message_seq: int = Field(sa_column=Column(BigInteger, nullable=False))


class RunUsageRow(SQLModel, table=True):
    """What a run consumed from one model: written with the run's end (whatever the end), so
    cancelled and failed runs count too. Kept when its thread is deleted: it is accounting.
    `user_key` is the thread's user scope and `api_key_id` the key that started the run (none
    in development mode), copied here so `gateway usage` never needs the thread."""

    __tablename__ = "run_usage"
    __table_args__ = (Index("ix_run_usage_created", "created_ms"),
                      Index("ix_run_usage_thread", "thread_id"))

    run_id: str = Field(primary_key=True, max_length=64)
    model: str = Field(primary_key=True, max_length=255)
    thread_id: str = Field(max_length=64)
    project_id: str = Field(max_length=128)
    agent: str = Field(max_length=64)
    api_key_id: str | None = Field(default=None, max_length=64)
    user_key: str | None = Field(default=None, max_length=512)
    calls: int = 0
    input_tokens: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    output_tokens: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    reasoning_tokens: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    cached_input_tokens: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    cost_usd: float | None = Field(default=None, sa_column=Column(Float, nullable=True))
    created_ms: int = Field(sa_column=Column(BigInteger, nullable=False))
    # Of `calls`, those cut off before the provider reported usage: their tokens and cost are
    # the gateway's estimate (`engine.usage.estimate`).
    estimated_calls: int = 0


class ApiKeyRow(SQLModel, table=True):
    """A managed API key (`gateway keys create`). Only the key's SHA-256 is kept: the key is
    shown once, when it is made. The limits are this key's own; unset ones take the defaults
    (`GATEWAY_KEY_*`)."""

    __tablename__ = "api_keys"

    id: str = Field(primary_key=True, max_length=64)
    project_id: str = Field(max_length=128, index=True)
    key_hash: str = Field(max_length=64, unique=True)
    # The key's first characters, so an operator can tell keys apart in `gateway keys list`.
    prefix: str = Field(max_length=16)
    created_ms: int = Field(sa_column=Column(BigInteger, nullable=False))
    expires_ms: int | None = Field(default=None, sa_column=Column(BigInteger))
    revoked_ms: int | None = Field(default=None, sa_column=Column(BigInteger))
    max_concurrent_runs: int | None = None
    runs_per_minute: int | None = None
    daily_tokens: int | None = Field(default=None, sa_column=Column(BigInteger))
    agent: str | None = Field(default=None, max_length=64)  # its runs' agent (None: default)
    # An operator's key (`--admin`): the console and `/v1/admin/...` only, never a client's call.
    admin: bool = False
    # When a request last came with it, to the minute (`KeyRing.used`); None: never.
    last_used_ms: int | None = Field(default=None, sa_column=Column(BigInteger))


class ChorusConnectionRow(SQLModel, table=True):
    """A Chorus connection string of an agent (`gateway chorus connect`): only the secret's
    SHA-256 is kept; the URL holding it is shown once. Its limits (None: the settings'
    `GATEWAY_CHORUS_*` defaults) are counted per connection, like a managed key's."""

    __tablename__ = "chorus_connections"

    id: str = Field(primary_key=True, max_length=64)
    project_id: str = Field(max_length=128)
    agent: str = Field(max_length=64)
    secret_hash: str = Field(max_length=64, unique=True)
    prefix: str = Field(max_length=16)
    created_ms: int = Field(sa_column=Column(BigInteger, nullable=False))
    revoked_ms: int | None = Field(default=None, sa_column=Column(BigInteger))
    max_concurrent_runs: int | None = None
    runs_per_minute: int | None = None
    daily_tokens: int | None = None


class ChorusDeliveryRow(SQLModel, table=True):
    """A Chorus message waiting for its channel's thread (one run at a time), so a message
    that arrives while the thread is busy is queued, not dropped; then, once its run started
    (`run_id`), kept with its callback URL only (the MCP headers are dropped) until the run's
    end has been POSTed to it, so the end of a run lost with its process is reported by
    another (`chorus/routes_sweeper.py`). `ticket` is the quota slot it took when it was
    accepted (its run holds it until it ends); `claimed_by` the process starting it, until
    `claim_until_ms` (then any process may)."""

    __tablename__ = "chorus_deliveries"
    __table_args__ = (Index("ix_chorus_deliveries_thread", "thread_id", "created_ms"),)

    id: str = Field(primary_key=True, max_length=64)
    thread_id: str = Field(max_length=64)
    connection_id: str = Field(max_length=64)
    payload: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    created_ms: int = Field(sa_column=Column(BigInteger, nullable=False))
    ticket: str | None = Field(default=None, max_length=64)
    claimed_by: str | None = Field(default=None, max_length=128)
    claim_until_ms: int | None = Field(default=None, sa_column=Column(BigInteger))
    run_id: str | None = Field(default=None, max_length=64)


class CronRow(SQLModel, table=True):
    """A schedule (`POST /v1/crons`): who owns it (the credential, the user scope and the
    agent its runs start for, so each firing is metered to them), what each firing sends, and
    `next_due_ms`, the one column the firing process moves forward on the condition that it
    still holds the due time it read, so exactly one process fires each due time."""

    __tablename__ = "crons"
    __table_args__ = (Index("ix_crons_project_user", "project_id", "user_key", "created_ms"),
                      Index("ix_crons_next_due", "next_due_ms"))

    id: str = Field(primary_key=True, max_length=64)
    project_id: str = Field(max_length=128)
    user_key: str = Field(max_length=255)
    # The credential that made it (None: development mode) and the signed-in user's scope.
    key_id: str | None = Field(default=None, max_length=64)
    signed_in_scope: str | None = Field(default=None, max_length=255)
    agent: str | None = Field(default=None, max_length=64)
    thread_id: str | None = Field(default=None, max_length=64)
    # {"cron": "0 9 * * 1-5", "timezone": "Europe/Paris"} or {"every": 3600}
    schedule: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    message: str
    metadata_: dict[str, Any] | None = Field(default=None, sa_column=Column("metadata", JSON))
    webhook: str | None = Field(default=None, max_length=2048)
    multitask_strategy: str = Field(default="enqueue", max_length=16)
    created_ms: int = Field(sa_column=Column(BigInteger, nullable=False))
    next_due_ms: int | None = Field(default=None, sa_column=Column(BigInteger))
    last_due_ms: int | None = Field(default=None, sa_column=Column(BigInteger))
    last_run_id: str | None = Field(default=None, max_length=64)
    # Why the last due time started no run (a refusal's code), None after a run started.
    last_error: str | None = Field(default=None, max_length=255)
    runs_started: int = 0


class WebhookDeliveryRow(SQLModel, table=True):
    """A run's completion webhook: written when the run starts, POSTed once the run ends by
    the process that claims it (`claimed_by` until `claim_until_ms`), retried with backoff
    until `state` is `delivered` or `failed`. One row per run: at most one success."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (Index("ix_webhook_deliveries_state_next", "state", "next_attempt_ms"),
                      Index("ix_webhook_deliveries_project_created", "project_id",
                            "created_ms"))

    run_id: str = Field(primary_key=True, max_length=64)
    thread_id: str = Field(max_length=64)
    project_id: str = Field(max_length=128)
    url: str = Field(max_length=2048)
    state: str = Field(default="pending", max_length=16)  # pending -> delivered | failed
    attempts: int = 0
    created_ms: int = Field(sa_column=Column(BigInteger, nullable=False))
    next_attempt_ms: int = Field(sa_column=Column(BigInteger, nullable=False))
    first_attempt_ms: int | None = Field(default=None, sa_column=Column(BigInteger))
    claimed_by: str | None = Field(default=None, max_length=128)
    claim_until_ms: int | None = Field(default=None, sa_column=Column(BigInteger))
    # The last attempt's outcome: an HTTP status, or why none was sent.
    last_status: int | None = None
    last_error: str | None = Field(default=None, max_length=255)
    done_ms: int | None = Field(default=None, sa_column=Column(BigInteger))


__all__ = [
    "ApiKeyRow",
    "ChorusConnectionRow",
    "ChorusDeliveryRow",
    "ComponentRow",
    "CronRow",
    "IdempotencyKeyRow",
    "MessageRow",
    "RunFrameRow",
    "RunRow",
    "RunUsageRow",
    "ThreadRow",
    "WebhookDeliveryRow",
]
