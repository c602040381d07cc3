"""The run manager: starts runs as background tasks, cancels them, and hands out their logs.

A run outlives its HTTP request: the task belongs to the manager, writes to the run's log, and
every SSE response is only a subscriber of that log. Starting a run validates the request
against the thread, then takes the thread's lock in the transaction that persists the run, on
the condition that the thread is still as validated: two racing requests can never both pass,
a retried request with the same `Idempotency-Key` attaches to the run the first one started,
and a crash can never leave a lock without its run.

Lifecycle duties across processes (cancel flags, leases, the reaper) are in `supervisor`; the
disconnect policy is in `disconnect`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..engine.deltas import ModelError
from ..engine.history import to_model_messages
from ..engine.loop import Model, RunInput, ServerToolSpec, run_agent
from ..observability import logs, metrics
from ..protocol import timbal
from ..protocol.clock import new_id, now_ms
from ..protocol.problems import ApiError
from ..protocol.tambo import InputMessage, ResourceBlock, RunRequest, TextBlock
from ..store.repository import ACTIVE_RUN_STATUSES, Store
from ..store.tables import MessageRow, RunRow, ThreadRow
from .component_state import ComponentStates, bind_run
from .disconnect import cancel_when_unwatched, grace_for
from .idempotency import (
    StartedRun,
    check_same_request,
    expired,
    fingerprint,
    start_new_thread_once,
)
from .log import Entry, LiveLog
from .log_writer import LogWriter
from .recorder import RunRecorder, durably
from .supervisor import lost_frame
from .views import follow

log = logging.getLogger(__name__)

# How long a finished run's log stays in memory for late subscribers (it is on disk anyway).
LINGER_SECONDS = 5.0
# How long a DELETE waits for a run in another process to end before answering 202.
REMOTE_CANCEL_WAIT_SECONDS = 5.0
# Retries of the optimistic start when the thread changed between validation and locking.
START_ATTEMPTS = 3

CANCELLED_ERROR = {"code": "CANCELLED", "message": "Run cancelled"}


@dataclass
class ActiveRun:
    row: RunRow
    live: LiveLog
    task: asyncio.Task[None] | None = None
    recorder: RunRecorder | None = None
    cancel_requested: bool = False
    finishing: bool = False
    lost: bool = False  # another process ended it (our lease expired): write nothing more
    done: asyncio.Event = field(default_factory=asyncio.Event)
    unattended: asyncio.Task[None] | None = None  # the disconnect policy's pending cancel

    @property
    def run_id(self) -> str:
        return self.row.id

    @property
    def subscribers(self) -> int:
        return self.live.subscribers

    @property
    def ending(self) -> bool:
        return self.finishing or self.cancel_requested or self.done.is_set()


class RunManager:
    def __init__(self, store: Store, model: Model, *, max_steps: int = 10,
                 tool_timeout: float = 30.0, lease_seconds: float = 30.0,
                 disconnect_grace_seconds: float = 30.0,
                 server_tools: dict[str, ServerToolSpec] | None = None,
                 idempotency_ttl_seconds: float = 86400.0) -> None:
        self.store, self.model = store, model
        self.max_steps, self.tool_timeout, self.lease_seconds = (
            max_steps, tool_timeout, lease_seconds)
        self.disconnect_grace_seconds = disconnect_grace_seconds
        self.idempotency_ttl_seconds = idempotency_ttl_seconds
        self.server_tools = server_tools or {}
        # Component state updates from the API and from server tools (`run_components()`).
        self.components = ComponentStates(store, self)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{new_id()}"
        # Set while the process drains for shutdown: makes the error a new run is refused with.
        self.refusal: Callable[[], Exception] | None = None
        self.active: dict[str, ActiveRun] = {}
        # Log flushes of all runs share transactions (see `log_writer`).
        self.log_writer = LogWriter(store)
        self._lingering: dict[str, LiveLog] = {}

    # -- starting -------------------------------------------------------------------------------

    async def start(self, project_id: str, thread: ThreadRow, request: RunRequest,
                    idempotency_key: str | None = None, run_id: str | None = None) -> StartedRun:
        """Start a run on the thread, or attach to the run `idempotency_key` already started.

        `run_id` is the client's own id for the run (AG-UI clients choose it); by default the
        gateway makes one."""
        self._refuse_if_closed()
        for _ in range(START_ATTEMPTS):
            if idempotency_key:
                existing = await self.store.find_run_by_idempotency_key(thread.id, idempotency_key)
                if existing is not None and expired(existing.created_ms,
                                                    self.idempotency_ttl_seconds):
                    await self.store.forget_run_idempotency_key(existing.id)
                elif existing is not None:
                    check_same_request(existing, fingerprint(request, thread.user_key),
                                       idempotency_key)
                    return StartedRun(existing, attached=True)
            current = await self.store.get_thread(project_id, thread.id)
            if current is None:
                raise ApiError(404, "THREAD_NOT_FOUND", f"Thread {thread.id} not found",
                               threadId=thread.id)
            if current.run_status != "idle":
                if idempotency_key and await self.store.find_run_by_idempotency_key(
                        thread.id, idempotency_key) is not None:
                    continue  # a racing request with this key started it meanwhile: attach
                raise ApiError(409, "CONCURRENT_RUN",
                               f"A run is already active on thread {thread.id}",
                               threadId=thread.id, currentRunId=current.current_run_id)
            run_id, now = run_id or new_id("run_"), now_ms()
            inputs = await self._validated_inputs(current, request, run_id, now)
            run = RunRow(
                id=run_id, thread_id=thread.id, project_id=project_id, status="queued",
                previous_run_id=request.previousRunId, created_ms=now,
                request=_request_snapshot(request, thread.user_key if idempotency_key else None,
                                          idempotency_key is not None),
                idempotency_key=idempotency_key,
                on_disconnect=request.onDisconnect or "grace",
                lease_owner=self.owner, lease_expires_ms=now + self._lease_ms(),
            )
            outcome = await self.store.start_run(run, inputs, now, current.last_completed_run_id)
            if outcome == "started":
                self._launch(run)
                return StartedRun(run, attached=False)
            # `conflict` or `duplicate`: the thread moved on meanwhile; look again.
        raise ApiError(409, "CONCURRENT_RUN",
                       f"Thread {thread.id} changed while the run was starting; please retry",
                       threadId=thread.id)

    async def start_new_thread(self, project_id: str,
                               create_thread: Callable[[], Awaitable[ThreadRow]],
                               request: RunRequest, user_key: str | None,
                               idempotency_key: str | None = None) -> StartedRun:
        """Create a thread and start a run on it; with `idempotency_key`, a retry gets the
        thread and run the first request created, not a second thread."""
        self._refuse_if_closed()
        if not idempotency_key:
            return await self.start_on(project_id, await create_thread(), request)
        return await start_new_thread_once(self, project_id, create_thread, request, user_key,
                                           idempotency_key)

    async def start_on(self, project_id: str, thread: ThreadRow, request: RunRequest,
                       idempotency_key: str | None = None, run_id: str | None = None
                       ) -> StartedRun:
        """Start the first run on a thread just created for it; if the run is refused (its
        continuation is invalid), the thread goes too: a refused request leaves nothing."""
        try:
            return await self.start(project_id, thread, request, idempotency_key, run_id)
        except ApiError:
            await self.store.delete_thread(thread.id)
            raise

    def _refuse_if_closed(self) -> None:
        """While the process drains for shutdown, no new run starts here (see `shutdown`)."""
        if self.refusal is not None:
            error = self.refusal()
            metrics.REFUSALS.labels(getattr(error, "code", "REFUSED")).inc()
            raise error

    def _lease_ms(self) -> int:
        return int(self.lease_seconds * 1000)

    def _launch(self, run: RunRow) -> None:
        active = ActiveRun(row=run, live=LiveLog(run.id))
        self.active[run.id] = active
        metrics.RUNS_STARTED.inc()
        metrics.ACTIVE_RUNS.inc()
        active.task = asyncio.create_task(self._execute(active), name=f"run {run.id}")

    async def _validated_inputs(self, thread: ThreadRow, request: RunRequest, run_id: str,
                                now: int) -> list[MessageRow]:
        previous = request.previousRunId
        if previous is None and thread.last_completed_run_id is not None:
            # As the real server: continuing a thread that has runs must name the last one, so
            # a client with a stale view of the thread cannot talk over a newer run.
            raise ApiError(400, "INVALID_PREVIOUS_RUN",
                           "previousRunId is required when continuing a thread with existing "
                           "messages", lastCompletedRunId=thread.last_completed_run_id)
        if previous is not None and previous != thread.last_completed_run_id:
            raise ApiError(400, "INVALID_PREVIOUS_RUN",
                           f"previousRunId {previous} does not match last completed run "
                           f"{thread.last_completed_run_id or '(none)'}",
                           lastCompletedRunId=thread.last_completed_run_id)
        message = request.message
        results = message.tool_results()
        pending = {p["toolCallId"]: p for p in thread.pending_tool_calls or []}
        given = [r.toolUseId for r in results]
        duplicates = sorted({i for i in given if given.count(i) > 1})
        missing = sorted(set(pending) - set(given))
        extra = sorted(set(given) - set(pending))
        if duplicates:
            raise ApiError(400, "INVALID_TOOL_RESULT",
                           f"Tool results given more than once: {', '.join(duplicates)}",
                           reason="DUPLICATE_RESULTS", duplicateToolCallIds=duplicates)
        if missing:
            raise ApiError(400, "INVALID_TOOL_RESULT",
                           f"Missing tool results for pending tool calls: {', '.join(missing)}",
                           reason="MISSING_RESULTS", missingToolCallIds=missing)
        if extra:
            raise ApiError(400, "INVALID_TOOL_RESULT",
                           f"Tool results provided for unknown tool calls: {', '.join(extra)}",
                           reason="EXTRA_RESULTS", extraToolCallIds=extra)
        return [MessageRow(id=new_id(), thread_id=thread.id, run_id=run_id, role="user",
                           parts=input_parts(message, pending), created_ms=now)]

    # -- executing ------------------------------------------------------------------------------

    async def _execute(self, active: ActiveRun) -> None:
        run = active.row
        snapshot = run.request or {}
        schemas = {c["name"]: c.get("stateSchema") for c in snapshot.get("availableComponents", [])
                   if c.get("stateSchema")}
        logs.run_id.set(run.id)  # this task's context: every line it logs names the run
        recorder = RunRecorder(self.store, active.live, run.thread_id, run.id, schemas,
                               writer=self.log_writer)
        active.recorder = recorder
        bind_run(self.components, run.thread_id)
        try:
            await recorder.emit(timbal.control(timbal.RUN_STARTED, threadId=run.thread_id,
                                               runId=run.id))
            now = now_ms()
            if not await durably(self.store.mark_running(run.id, run.thread_id, self.owner, now,
                                                         now + self._lease_ms())):
                self.lose(run.id)
                raise asyncio.CancelledError
            await self._finish(active, recorder, await self._agent(run, snapshot, recorder))
        except asyncio.CancelledError:
            if active.lost:  # a reaper ended it; its log on disk already says RUN_LOST
                recorder.show(lost_frame())
            elif active.cancel_requested:
                await self._end(active, recorder, "cancelled",
                                [timbal.control(timbal.RUN_CANCELLED)], error=CANCELLED_ERROR)
            else:  # the process is shutting down: the client may simply retry
                error = {"code": "SERVER_SHUTDOWN", "message": "The gateway is restarting",
                         "category": "server_error", "isRetryable": True, "status": 503}
                await self._end(active, recorder, "failed",
                                [timbal.control(timbal.ERROR, **error)], error=error)
                raise
        except ModelError as exc:
            error = {"code": exc.code, "message": exc.message, "category": exc.category,
                     "isRetryable": exc.retryable, "status": exc.status}
            await self._end(active, recorder, "failed", [timbal.control(timbal.ERROR, **error)],
                            error=error)
        except Exception:
            log.exception("run %s failed", run.id)
            error = {"code": "INTERNAL_ERROR", "message": "An internal error occurred",
                     "category": "server_error", "isRetryable": False}
            await self._end(active, recorder, "failed", [timbal.control(timbal.ERROR, **error)],
                            error=error)
        finally:
            await self._retire(active, recorder)

    async def _agent(self, run: RunRow, snapshot: dict[str, Any], recorder: RunRecorder):
        rows = await self.store.history(run.thread_id)
        for row in rows:  # the run's input, so that the log is the whole transcript
            if row.run_id == run.id and row.role == "user":
                for part in row.parts:
                    await recorder.emit(timbal.part_frame(part, row.created_ms))
        components = await self.store.components_of(run.thread_id)
        states = {cid: c.state for cid, c in components.items()}
        run_input = RunInput(
            history=to_model_messages(rows, states),
            client_tools=snapshot.get("tools", []),
            components=snapshot.get("availableComponents", []),
            server_tools=self.server_tools,
            tool_choice=snapshot.get("toolChoice"),
            force_component=snapshot.get("forceComponent"),
            max_tokens=snapshot.get("maxTokens"),
            temperature=snapshot.get("temperature"),
            model=snapshot.get("model"),
            max_steps=self.max_steps,
            tool_timeout=self.tool_timeout,
            call_counts=tool_call_counts(rows),
        )
        return await run_agent(self.model, run_input, recorder)

    async def _finish(self, active: ActiveRun, recorder: RunRecorder, outcome: Any) -> None:
        finished = timbal.control(timbal.RUN_FINISHED)
        if outcome.pending:
            pending = [{k: p[k] for k in ("toolCallId", "toolName", "arguments")}
                       for p in outcome.pending]
            awaiting = timbal.control(timbal.RUN_AWAITING_INPUT, pendingToolCalls=outcome.pending)
            await self._end(active, recorder, "awaiting_input", [awaiting, finished],
                            pending=pending)
        else:
            await self._end(active, recorder, "completed", [finished])

    async def _end(self, active: ActiveRun, recorder: RunRecorder, status: str,
                   frames: list[timbal.Frame], *, pending: list[dict[str, Any]] | None = None,
                   error: dict[str, Any] | None = None) -> None:
        """Commit the terminal state together with the end of the log, then show the terminal
        events: the Tambo client closes the stream the moment it reads `awaiting_input` and
        posts the continuation within milliseconds, so the thread must already be idle."""
        active.finishing = True
        run = active.row

        async def commit(entries: list[tuple[int, int, dict[str, Any]]]) -> bool:
            return await self.store.finish_run(run.id, run.thread_id, status, now_ms(),
                                               pending=pending, error=error, owner=self.owner,
                                               frames=entries)

        committed = await recorder.finish(frames, commit)
        metrics.RUNS_ENDED.labels(status if committed else "lost",
                                  (error or {}).get("code", "")).inc()
        if not committed:
            log.warning("run %s was ended by another process (lease lost) before it could "
                        "finish as %s", run.id, status)
            recorder.show(lost_frame())

    async def _retire(self, active: ActiveRun, recorder: RunRecorder) -> None:
        try:
            await recorder.close()
        finally:
            metrics.ACTIVE_RUNS.dec()
            active.done.set()
            if active.unattended is not None:
                active.unattended.cancel()
            self.active.pop(active.row.id, None)
            self._lingering[active.row.id] = active.live
            asyncio.get_running_loop().call_later(
                LINGER_SECONDS, self._lingering.pop, active.row.id, None)

    # -- cancelling and reading -------------------------------------------------------------------

    async def cancel(self, run_id: str) -> RunRow | None:
        """Cancel a run wherever it executes; the run as it stands afterwards (None: unknown).

        Here, its task is cancelled at once. In another process, the run is flagged and that
        process's supervisor cancels it within a poll interval; this waits (bounded) for the
        outcome. A run whose process died (lease expired) is ended here. Idempotent: a run
        that already ended is left as it ended.
        """
        active = self.active.get(run_id)
        if active is not None:
            self.request_local_cancel(run_id)
            await asyncio.shield(active.done.wait())
            return await self.store.get_run(run_id)
        row = await self.store.get_run(run_id)
        if row is None or row.status not in ACTIVE_RUN_STATUSES:
            return row
        now = now_ms()
        if row.lease_expires_ms is None or row.lease_expires_ms < now:
            await self.store.end_orphaned_run(row, now, "cancelled", CANCELLED_ERROR,
                                              timbal.control(timbal.RUN_CANCELLED))
        else:
            await self.store.request_cancel(run_id, now)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REMOTE_CANCEL_WAIT_SECONDS
        while True:
            row = await self.store.get_run(run_id)
            if row is None or row.status not in ACTIVE_RUN_STATUSES or loop.time() > deadline:
                return row
            await asyncio.sleep(0.05)

    def request_local_cancel(self, run_id: str) -> None:
        """Cancel a run of this process unless it is already ending (idempotent)."""
        active = self.active.get(run_id)
        if active is None or active.task is None or active.finishing or active.cancel_requested:
            return
        active.cancel_requested = True
        active.task.cancel()

    def lose(self, run_id: str) -> None:
        """Stop a run another process has ended (our lease on it expired) without writing."""
        active = self.active.get(run_id)
        if active is None or active.task is None or active.finishing or active.lost:
            return
        log.warning("lost the lease on run %s; stopping it here", run_id)
        active.lost = True
        if active.recorder is not None:
            active.recorder.fenced = True
        active.task.cancel()

    def active_run_for_thread(self, thread_id: str) -> ActiveRun | None:
        """The run this process is executing on the thread, if any.

        A run that is already ending is skipped: for a moment it can overlap the thread's next
        run, and a state delta published to it would be dropped with its closing log.
        """
        for active in self.active.values():
            if active.row.thread_id == thread_id and not active.ending:
                return active
        return None

    def live_log(self, run_id: str) -> LiveLog | None:
        active = self.active.get(run_id)
        return active.live if active is not None else self._lingering.get(run_id)

    async def entries(self, run_id: str) -> AsyncGenerator[Entry, None]:
        """The run's log from its first frame, then live until it ends.

        Leaving before the end is a disconnect: the run goes on, and its policy decides
        whether it is cancelled later (`disconnect`)."""
        metrics.ACTIVE_SUBSCRIBERS.inc()
        try:
            async with contextlib.aclosing(follow(self.live_log(run_id), self.store,
                                                  run_id)) as source:
                async for entry in source:
                    yield entry
        finally:
            metrics.ACTIVE_SUBSCRIBERS.dec()
            self._departed(run_id)

    def _departed(self, run_id: str) -> None:
        """A subscriber left: if it was the last one, arm the run's disconnect policy."""
        active = self.active.get(run_id)
        if active is None or active.ending or active.subscribers > 0:
            return
        grace = grace_for(active.row.on_disconnect, self.disconnect_grace_seconds)
        if grace is None:
            return
        if active.unattended is not None:
            active.unattended.cancel()  # the window counts from the last departure
        active.unattended = asyncio.create_task(
            cancel_when_unwatched(active, grace, self.store,
                                  lambda: self._cancel_unwatched(run_id)),
            name=f"disconnect policy {run_id}")

    async def _cancel_unwatched(self, run_id: str) -> None:
        log.info("run %s: no subscriber came back; cancelling it (disconnect policy)", run_id)
        self.request_local_cancel(run_id)

    async def shutdown(self) -> None:
        """Stop every run this process owns; each ends with a retryable RUN_ERROR."""
        tasks = [a.task for a in self.active.values() if a.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.log_writer.close()


def input_parts(message: InputMessage, pending: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The input message as Timbal values: client tool results first, then the user's text."""
    parts: list[dict[str, Any]] = []
    for result in message.tool_results():
        blocks = result.content if isinstance(result.content, list) else [
            TextBlock(type="text", text=result.content)]
        text = "\n".join(b.text for b in blocks if isinstance(b, TextBlock))
        value: dict[str, Any] = {
            "id": new_id(), "type": "tool_result", "origin": "client",
            "toolCallId": result.toolUseId,
            "name": pending.get(result.toolUseId, {}).get("toolName"),
            "blocks": [b.model_dump(exclude_none=True) for b in blocks],
        }
        if result.isError:
            value.update(status="error", error=text)
        else:
            value.update(status="success", output=text)
        parts.append(value)
    blocks = [b for b in message.content if isinstance(b, (TextBlock, ResourceBlock))]
    if blocks:
        user: dict[str, Any] = {
            "id": new_id(), "type": "user", "content": message.text(),
            "blocks": [b.model_dump(exclude_none=True) for b in blocks],
        }
        if message.additionalContext:
            user["context"] = message.additionalContext
        if message.metadata:
            user["metadata"] = message.metadata
        parts.append(user)
    elif message.additionalContext:
        # A tool-result continuation: React sends the page's context with it too.
        parts.append({"id": new_id(), "type": "x-context", "context": message.additionalContext})
    return parts


def tool_call_counts(rows: list[MessageRow]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        for part in row.parts:
            if part.get("type") == "tool_call":
                counts[part["name"]] = counts.get(part["name"], 0) + 1
    return counts


def _request_snapshot(request: RunRequest, user_key: str | None = None,
                      with_fingerprint: bool = False) -> dict[str, Any]:
    """What the run needs from its request, kept on the run row (the task reads it from there),
    and, for a run started with an Idempotency-Key, the fingerprint a retry must match."""
    data = request.model_dump(mode="json", exclude_none=True,
                              include={"availableComponents", "tools", "toolChoice",
                                       "forceComponent", "maxTokens", "temperature",
                                       "runMetadata", "model"})
    if with_fingerprint:
        data["fingerprint"] = fingerprint(request, user_key)
    return data
