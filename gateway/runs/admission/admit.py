"""Admission: a run request is checked against its thread and persisted with the thread's lock.

Starting a run validates the request against the thread, then takes the thread's lock in the
transaction that persists the run, on the condition that the thread is still as validated: two
racing requests can never both pass, a retried request with the same `Idempotency-Key`
attaches to the run the first one started, and a crash can never leave a lock without its run.

A start is one transaction: the thread as the request read it is validated (it is read again
only if the lock finds it changed), and a new thread is created with the run already holding
its lock (`admit_new_thread`). The run is persisted as `running`: its task starts in the same
breath, and a process that dies before it runs leaves a lease for the reaper as any other run.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from ...protocol.clock import new_id, now_ms
from ...protocol.problems import ApiError, Problem
from ...protocol.run_spec import RunSpec, SpecRow
from ...store.repository import Store
from ...store.rows import made
from ...store.tables import MessageRow, RunRow, ThreadRow
from .. import approvals
from ..automation import webhooks
from .threads import ThreadRows

# Retries of the optimistic start when the thread changed between validation and locking.
START_ATTEMPTS = 3


def fingerprint(request: dict[str, Any], user_key: str | None) -> str:
    """What a retry must repeat exactly to be the same request: its body and its user."""
    canonical = json.dumps([request, user_key], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def reused(key: str) -> ApiError:
    return ApiError(Problem.IDEMPOTENCY_KEY_REUSED,
                    "This Idempotency-Key was already used with a different request; use a new "
                    "key for a new request", idempotencyKey=key)


def check_same_request(run: RunRow, spec: RunSpec, user_key: str | None, key: str) -> None:
    """A retry with `key` must repeat the request that started `run`, for the same user."""
    recorded = (run.request or {}).get("fingerprint")
    if recorded is not None and recorded != spec_fingerprint(spec, user_key):
        raise reused(key)


def expired(created_ms: int, ttl_seconds: float) -> bool:
    return now_ms() - created_ms > ttl_seconds * 1000


@dataclass(frozen=True)
class StartedRun:
    run: RunRow
    attached: bool  # an earlier request with the same Idempotency-Key started it
    # The thread's whole history, when the start knows it (a new thread): not read again.
    history: list[MessageRow] | None = None
    queued: bool = False  # waits for its thread (`multitask.enqueue`): nothing to launch
    # The spec a run admitted here was written with (its task runs on it); None: the run was
    # not admitted by this start (attached, queued), its row holds its spec.
    spec: RunSpec | None = None


async def admit(store: Store, owner: str, lease_ms: int, project_id: str, thread: ThreadRow,
                spec: RunSpec, idempotency_ttl_seconds: float, client_run_id: str | None = None,
                default_model: str | None = None) -> StartedRun:
    """Persist a new run on the thread under `owner`'s lease (`attached=False`: the caller
    launches it), or return the run the spec's idempotency key already started
    (`attached=True`).
    `client_run_id` is the client's own name for the run when it chooses one (AG-UI clients
    do; the run's id is always the gateway's);
    `default_model` is the model the run calls when the request names none."""
    # The thread as the caller read it: a start that passes on it is safe (the lock is taken
    # only if the thread is still as validated), and it is read again before a refusal.
    current: ThreadRow | None = thread
    fresh = False
    idempotency_key = spec.idempotency.key if spec.idempotency else None
    for _ in range(START_ATTEMPTS + 1):  # one more for the caller's copy
        if idempotency_key:
            existing = await store.find_run_by_idempotency_key(thread.id, idempotency_key)
            if existing is not None and expired(existing.created_ms, idempotency_ttl_seconds):
                await store.forget_run_idempotency_key(existing.id)
            elif existing is not None:
                check_same_request(existing, spec, thread.user_key, idempotency_key)
                return StartedRun(existing, attached=True)
        if current is None:
            current, fresh = await store.get_thread(project_id, thread.id), True
        if current is None:
            raise ApiError(Problem.THREAD_NOT_FOUND, f"Thread {thread.id} not found",
                           threadId=thread.id)
        new_run_id, now = new_id("run_"), now_ms()
        try:
            if current.run_status != "idle":
                if idempotency_key and await store.find_run_by_idempotency_key(
                        thread.id, idempotency_key) is not None:
                    current = None
                    continue  # a racing request with this key started it meanwhile: attach
                raise ApiError(Problem.CONCURRENT_RUN,
                               f"A run is already active on thread {thread.id}",
                               threadId=thread.id, currentRunId=current.current_run_id)
            inputs = await validated_inputs(current, spec, new_run_id, now)
        except ApiError:
            if fresh:
                raise
            current = None  # refused on the caller's copy: decide on the thread as it is
            continue
        run = new_run(new_run_id, thread, spec, owner, now, lease_ms, default_model,
                      client_run_id)
        outcome = await store.start_run(run, inputs, now, current.last_completed_run_id,
                                        paused=bool(current.pending_tool_calls),
                                        webhook=webhooks.delivery(run, spec.webhook))
        if outcome == "started":
            return StartedRun(run, attached=False, spec=spec)
        current = None  # `conflict` or `duplicate`: the thread moved on meanwhile; look again.
    raise ApiError(Problem.CONCURRENT_RUN,
                   f"Thread {thread.id} changed while the run was starting; please retry",
                   threadId=thread.id)


async def admit_new_thread(store: Store, owner: str, lease_ms: int, thread: ThreadRows,
                           spec: RunSpec, default_model: str | None = None,
                           client_run_id: str | None = None) -> StartedRun:
    """Create `thread` with a run on it under `owner`'s lease, in one transaction; nothing is
    written if the request is refused."""
    run_id, now = new_id("run_"), now_ms()
    inputs = await validated_inputs(thread.row, spec, run_id, now)
    run = new_run(run_id, thread.row, spec, owner, now, lease_ms, default_model, client_run_id)
    await store.start_run_on_new_thread(thread.row, thread.messages, run, inputs,
                                        webhooks.delivery(run, spec.webhook))
    return StartedRun(run, attached=False, history=[*thread.messages, *inputs], spec=spec)


def new_run(run_id: str, thread: ThreadRow, spec: RunSpec, owner: str, now: int,
            lease_ms: int, default_model: str | None, client_id: str | None = None) -> RunRow:
    """The run as its start persists it: already running (its task starts at once), with the
    model it is about to call (`set_run_model` replaces it if a fallback answers)."""
    return made(
        RunRow,
        id=run_id, client_id=client_id, thread_id=thread.id, project_id=thread.project_id,
        status="running",
        previous_run_id=spec.previous_run_id, created_ms=now, started_ms=now,
        request=request_row(spec, thread.user_key),
        idempotency_key=spec.idempotency.key if spec.idempotency else None,
        on_disconnect=spec.on_disconnect or "grace",
        lease_owner=owner, lease_expires_ms=now + lease_ms,
        model=spec.model or default_model,
    )


async def validated_inputs(thread: ThreadRow, spec: RunSpec, run_id: str,
                           now: int) -> list[MessageRow]:
    previous = spec.previous_run_id
    if previous is None and thread.last_completed_run_id is not None:
        # As the real server: continuing a thread that has runs must name the last one, so
        # a client with a stale view of the thread cannot talk over a newer run.
        raise ApiError(Problem.INVALID_PREVIOUS_RUN,
                       "previousRunId is required when continuing a thread with existing "
                       "messages", lastCompletedRunId=thread.last_completed_run_id)
    if previous is not None and previous != thread.last_completed_run_id:
        raise ApiError(Problem.INVALID_PREVIOUS_RUN,
                       f"previousRunId {previous} does not match last completed run "
                       f"{thread.last_completed_run_id or '(none)'}",
                       lastCompletedRunId=thread.last_completed_run_id)
    pending = {p["toolCallId"]: p for p in thread.pending_tool_calls or []}
    given = [r.tool_call_id for r in spec.tool_results]
    duplicates = sorted({i for i in given if given.count(i) > 1})
    # A call whose approval expired is denied whatever comes: it needs no answer.
    lapsed = {i for i, p in pending.items() if approvals.expired(p, now)}
    missing = sorted(set(pending) - set(given) - lapsed)
    extra = sorted(set(given) - set(pending))
    if duplicates:
        raise ApiError(Problem.INVALID_TOOL_RESULT,
                       f"Tool results given more than once: {', '.join(duplicates)}",
                       reason="DUPLICATE_RESULTS", duplicateToolCallIds=duplicates)
    if missing:
        raise ApiError(Problem.INVALID_TOOL_RESULT,
                       f"Missing tool results for pending tool calls: {', '.join(missing)}",
                       reason="MISSING_RESULTS", missingToolCallIds=missing)
    if extra:
        raise ApiError(Problem.INVALID_TOOL_RESULT,
                       f"Tool results provided for unknown tool calls: {', '.join(extra)}",
                       reason="EXTRA_RESULTS", extraToolCallIds=extra)
    return [made(MessageRow, id=new_id(), thread_id=thread.id, run_id=run_id, role="user",
                       parts=input_parts(spec, pending, now, thread.user_key), created_ms=now)]


def input_parts(spec: RunSpec, pending: dict[str, dict[str, Any]], now: int,
                sender: str | None = None) -> list[dict[str, Any]]:
    """The run's input as Timbal values: client tool results and approval decisions first
    (`runs/approvals.py`), then the user's text. `sender` (Timbal's multi-actor threads) is
    the thread's user scope: the user wrote the message, and the user's browser ran the
    client tools."""
    parts: list[dict[str, Any]] = []
    signed = {"sender": sender} if sender else {}
    answered = {r.tool_call_id: r for r in spec.tool_results}
    for call_id, entry in pending.items():
        if approvals.is_approval(entry):
            parts.append(approvals.input_part(entry, answered.get(call_id), now))
    for result in spec.tool_results:
        if approvals.is_approval(pending.get(result.tool_call_id, {})):
            continue
        value: dict[str, Any] = {
            "id": new_id(), "type": "tool_result", "origin": "client",
            "toolCallId": result.tool_call_id,
            "name": pending.get(result.tool_call_id, {}).get("toolName"),
            "blocks": result.blocks, **signed,
        }
        if result.is_error:
            value.update(status="error", error=result.text)
        else:
            value.update(status="success", output=tool_output(result.text))
        parts.append(value)
    user = spec.user
    if user is not None:
        part: dict[str, Any] = {"id": user.id or new_id(), "type": "user",
                                "content": user.text, "blocks": user.blocks, **signed}
        if user.context:
            part["context"] = user.context
        if user.metadata:
            part["metadata"] = user.metadata
        if user.client_id:
            part["clientMessageId"] = user.client_id
        parts.append(part)
    elif spec.context:
        # A tool-result continuation: React sends the page's context with it too.
        parts.append({"id": new_id(), "type": "x-context", "context": spec.context})
    return parts


def tool_output(text: str) -> Any:
    """A client tool's output as the value it is: a JSON object or array the browser sent as
    text is stored as that object (as a server tool's is), any other text as the string."""
    if text[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text


def spec_fingerprint(spec: RunSpec, user_key: str | None) -> str | None:
    """The fingerprint of a keyed request (None without an idempotency key)."""
    if spec.idempotency is None:
        return None
    return fingerprint(spec.idempotency.request, user_key)


def request_row(spec: RunSpec, user_key: str | None = None) -> SpecRow:
    """The run row's `request`: the spec (`RunSpec.to_row`) and, for a run started with an
    idempotency key, the fingerprint a retry must match."""
    data = spec.to_row()
    if spec.idempotency is not None:
        data["fingerprint"] = spec_fingerprint(spec, user_key)
    return data
