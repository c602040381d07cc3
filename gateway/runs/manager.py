"""The run manager: starts runs as background tasks, cancels them, and hands out their logs.

A run outlives its HTTP request: the task belongs to the manager, writes to the run's log, and
every SSE response is only a subscriber of that log. Starting a run takes the thread's lock in
one atomic statement, then validates the continuation against the thread as it is under the
lock, so two racing requests can never both pass.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from ..engine.deltas import ModelError
from ..engine.history import to_model_messages
from ..engine.loop import Model, RunInput, ServerToolSpec, run_agent
from ..protocol import timbal
from ..protocol.clock import new_id, now_ms
from ..protocol.problems import ApiError
from ..protocol.tambo import InputMessage, ResourceBlock, RunRequest, TextBlock
from ..store.repository import ACTIVE_RUN_STATUSES, Store
from ..store.tables import MessageRow, RunRow, ThreadRow
from .log import Entry, LiveLog
from .recorder import RunRecorder
from .views import follow

log = logging.getLogger(__name__)

# How long a finished run's log stays in memory for late subscribers (it is on disk anyway).
LINGER_SECONDS = 5.0


@dataclass
class ActiveRun:
    row: RunRow
    live: LiveLog
    task: asyncio.Task[None] | None = None
    recorder: RunRecorder | None = None
    cancel_requested: bool = False
    finishing: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)


class RunManager:
    def __init__(self, store: Store, model: Model, *, max_steps: int = 10,
                 tool_timeout: float = 30.0, lease_seconds: float = 30.0,
                 server_tools: dict[str, ServerToolSpec] | None = None) -> None:
        self.store, self.model = store, model
        self.max_steps, self.tool_timeout, self.lease_seconds = (
            max_steps, tool_timeout, lease_seconds)
        self.server_tools = server_tools or {}
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{new_id()}"
        self.active: dict[str, ActiveRun] = {}
        self._lingering: dict[str, LiveLog] = {}

    # -- starting -------------------------------------------------------------------------------

    async def start(self, project_id: str, thread: ThreadRow, request: RunRequest,
                    idempotency_key: str | None = None) -> RunRow:
        if idempotency_key:
            existing = await self.store.find_run_by_idempotency_key(thread.id, idempotency_key)
            if existing is not None:
                return existing
        run_id, now = new_id("run_"), now_ms()
        if not await self.store.try_lock_thread(thread.id, run_id, now):
            current = await self.store.get_thread(project_id, thread.id)
            current_run = current.current_run_id if current else None
            raise ApiError(409, "CONCURRENT_RUN", f"A run is already active on thread {thread.id}",
                           threadId=thread.id, currentRunId=current_run)
        try:
            locked = await self.store.get_thread(project_id, thread.id)
            assert locked is not None
            inputs = await self._validated_inputs(locked, request, run_id, now)
            run = RunRow(
                id=run_id, thread_id=thread.id, project_id=project_id, status="queued",
                previous_run_id=request.previousRunId, created_ms=now,
                request=_request_snapshot(request), idempotency_key=idempotency_key,
                on_disconnect=request.onDisconnect or "grace",
            )
            await self.store.begin_run(run, inputs, now)
        except BaseException:
            await self.store.unlock_thread(thread.id, run_id)
            raise
        active = ActiveRun(row=run, live=LiveLog(run_id))
        self.active[run_id] = active
        active.task = asyncio.create_task(self._execute(active), name=f"run {run_id}")
        return run

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
        recorder = RunRecorder(self.store, active.live, run.thread_id, run.id, schemas)
        active.recorder = recorder
        try:
            await recorder.emit(timbal.control(timbal.RUN_STARTED, threadId=run.thread_id,
                                               runId=run.id))
            now = now_ms()
            await self.store.mark_running(run.id, run.thread_id, self.owner, now,
                                          now + int(self.lease_seconds * 1000))
            await self._finish(active, recorder, await self._agent(run, snapshot, recorder))
        except asyncio.CancelledError:
            if active.cancel_requested:
                await self._end(active, recorder, "cancelled",
                                timbal.control(timbal.RUN_CANCELLED),
                                error={"code": "CANCELLED", "message": "Run cancelled"})
            else:  # the process is shutting down: the client may simply retry
                error = {"code": "SERVER_SHUTDOWN", "message": "The gateway is restarting",
                         "category": "server_error", "isRetryable": True, "status": 503}
                await self._end(active, recorder, "failed", timbal.control(timbal.ERROR, **error),
                                error=error)
                raise
        except ModelError as exc:
            error = {"code": exc.code, "message": exc.message, "category": exc.category,
                     "isRetryable": exc.retryable, "status": exc.status}
            await self._end(active, recorder, "failed", timbal.control(timbal.ERROR, **error),
                            error=error)
        except Exception:
            log.exception("run %s failed", run.id)
            error = {"code": "INTERNAL_ERROR", "message": "An internal error occurred",
                     "category": "server_error", "isRetryable": False}
            await self._end(active, recorder, "failed", timbal.control(timbal.ERROR, **error),
                            error=error)
        finally:
            await self._retire(active, recorder)

    async def _agent(self, run: RunRow, snapshot: dict[str, Any], recorder: RunRecorder):
        rows = await self.store.history(run.thread_id)
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
            max_steps=self.max_steps,
            tool_timeout=self.tool_timeout,
            call_counts=tool_call_counts(rows),
        )
        return await run_agent(self.model, run_input, recorder)

    async def _finish(self, active: ActiveRun, recorder: RunRecorder, outcome: Any) -> None:
        """Commit the terminal state, then write the terminal events.

        The Tambo client closes the stream the moment it reads `awaiting_input` and posts the
        continuation within milliseconds, so the thread must already be idle by then.
        """
        active.finishing = True
        run = active.row
        if outcome.pending:
            pending = [{k: p[k] for k in ("toolCallId", "toolName", "arguments")}
                       for p in outcome.pending]
            await self.store.finish_run(run.id, run.thread_id, "awaiting_input", now_ms(),
                                        pending=pending)
            await recorder.emit(timbal.control(timbal.RUN_AWAITING_INPUT,
                                               pendingToolCalls=outcome.pending))
        else:
            await self.store.finish_run(run.id, run.thread_id, "completed", now_ms())
        await recorder.emit(timbal.control(timbal.RUN_FINISHED))

    async def _end(self, active: ActiveRun, recorder: RunRecorder, status: str,
                   frame: timbal.Frame, error: dict[str, Any]) -> None:
        active.finishing = True
        run = active.row
        await self.store.finish_run(run.id, run.thread_id, status, now_ms(), error=error)
        await recorder.emit(frame)

    async def _retire(self, active: ActiveRun, recorder: RunRecorder) -> None:
        try:
            await recorder.close()
        finally:
            active.done.set()
            self.active.pop(active.row.id, None)
            self._lingering[active.row.id] = active.live
            asyncio.get_running_loop().call_later(
                LINGER_SECONDS, self._lingering.pop, active.row.id, None)

    # -- cancelling and reading -------------------------------------------------------------------

    async def cancel(self, run_id: str) -> bool:
        """Cancel a run running in this process; True if it was (or is being) cancelled here."""
        active = self.active.get(run_id)
        if active is None or active.task is None:
            return False
        if not active.finishing and not active.cancel_requested:
            active.cancel_requested = True
            active.task.cancel()
        await asyncio.shield(active.done.wait())
        return True

    def active_run_for_thread(self, thread_id: str) -> ActiveRun | None:
        """The run this process is executing on the thread, if any."""
        for active in self.active.values():
            if active.row.thread_id == thread_id:
                return active
        return None

    def live_log(self, run_id: str) -> LiveLog | None:
        active = self.active.get(run_id)
        return active.live if active is not None else self._lingering.get(run_id)

    def entries(self, run_id: str) -> AsyncIterator[Entry]:
        async def is_active() -> bool:
            row = await self.store.get_run(run_id)
            return row is not None and row.status in ACTIVE_RUN_STATUSES

        return follow(self.live_log(run_id), self.store, run_id, is_active)

    async def shutdown(self) -> None:
        """Stop every run this process owns; each ends with a retryable RUN_ERROR."""
        tasks = [a.task for a in self.active.values() if a.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


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
    return parts


def tool_call_counts(rows: list[MessageRow]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        for part in row.parts:
            if part.get("type") == "tool_call":
                counts[part["name"]] = counts.get(part["name"], 0) + 1
    return counts


def _request_snapshot(request: RunRequest) -> dict[str, Any]:
    """What the run needs from its request, kept on the run row (the task reads it from there)."""
    data = request.model_dump(mode="json", exclude_none=True,
                              include={"availableComponents", "tools", "toolChoice",
                                       "forceComponent", "maxTokens", "temperature",
                                       "runMetadata"})
    return data
