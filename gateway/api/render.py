"""Stored rows -> the Tambo REST shapes the clients read.

Each body is built as its response model (`protocol/tambo.py`) and dumped with `wire()`, so what
the clients receive is what the OpenAPI document, generated from the same models, publishes.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..engine.usage import summed
from ..protocol.clock import iso_ms
from ..protocol.run_spec import RunSpec
from ..protocol.tambo import ForkOrigin, Message, Run, Thread, Usage
from ..protocol.timbal import tool_result_text
from ..store.repository import ACTIVE_RUN_STATUSES
from ..store.tables import ComponentRow, MessageRow, RunRow, ThreadRow


def thread_model(row: ThreadRow, model: type[Thread] = Thread, *, owner: bool = True,
                 **extra: Any) -> Thread:
    """A thread row as `Thread`, or as a model that extends it with `extra` fields.

    `owner=False` leaves out whose thread it is (`userKey`): a caller that named no user scope
    holds only the thread id, and the owner's userKey would open every other thread of theirs.
    """
    if owner:
        extra["userKey"] = row.user_key
    return model(
        id=row.id,
        createdAt=iso_ms(row.created_ms),
        updatedAt=iso_ms(row.updated_ms),
        runStatus=row.run_status,
        name=row.name,
        metadata=row.meta,
        currentRunId=row.current_run_id,
        lastCompletedRunId=row.last_completed_run_id,
        lastRunCancelled=row.last_run_cancelled,
        lastRunError=row.last_run_error,
        pendingToolCallIds=[p["toolCallId"] for p in row.pending_tool_calls or []],
        forkedFrom=ForkOrigin(threadId=row.forked_from_thread_id,
                              messageId=row.forked_from_message_id)
        if row.forked_from_thread_id and row.forked_from_message_id else None,
        contextTokens=row.context_tokens,
        historyTrimmed=row.context_trimmed if row.context_tokens is not None else None,
        **extra,
    )


def message_model(row: MessageRow, components: Mapping[str, ComponentRow] | None = None
                  ) -> Message:
    components = components or {}
    blocks: list[dict[str, Any]] = []
    reasoning: list[str] = []
    for part in row.parts:
        ptype = part.get("type")
        if ptype == "user":
            blocks.extend(part.get("blocks") or [{"type": "text", "text": part.get("content", "")}])
        elif ptype in ("agent", "x-system") and part.get("content"):
            blocks.append({"type": "text", "text": part["content"]})
        elif ptype == "thinking" and part.get("content"):
            reasoning.append(part["content"])
        elif ptype == "tool_call":
            blocks.append({"type": "tool_use", "id": part["toolCallId"], "name": part["name"],
                           "input": part.get("arguments") or {}})
        elif ptype == "x-component":
            component = components.get(part["componentId"])
            block = {"type": "component", "id": part["componentId"], "name": part["name"],
                     "props": part.get("props") or {}}
            state = component.state if component is not None else part.get("state")
            if state is not None:
                block["state"] = state
            blocks.append(block)
        elif ptype == "tool_result":
            block = {"type": "tool_result", "toolUseId": part["toolCallId"],
                     "content": part.get("blocks") or [{"type": "text",
                                                        "text": tool_result_text(part)}]}
            if part.get("status") == "error":
                block["isError"] = True
            blocks.append(block)
        elif ptype == "x-approval":  # the client's answer to an approval, as it sent it
            blocks.append({"type": "tool_result", "toolUseId": part["toolCallId"],
                           "content": [{"type": "text",
                                        "text": part.get("answer") or part["decision"]}]})
    role = row.role
    if role == "user" and blocks and all(b["type"] == "tool_result" for b in blocks):
        role = "assistant"  # as the real server reads back client tool results
    return Message(id=row.id, role=role, content=blocks, createdAt=iso_ms(row.created_ms),
                   runId=row.run_id, reasoning=reasoning or None,
                   isCancelled=True if row.is_cancelled else None, metadata=row.meta or None)


def usage_model(entries: list[dict[str, Any]]) -> Usage | None:
    """Usage entries (a run's, or a thread's per model) as their sum, or None for none."""
    return Usage.model_validate(summed(entries)) if entries else None


def run_model(run: RunRow, usage: list[dict[str, Any]] | None = None) -> Run:
    return Run(
        id=run.id,
        threadId=run.thread_id,
        status=run.status,
        createdAt=iso_ms(run.created_ms),
        startedAt=iso_ms(run.started_ms) if run.started_ms else None,
        finishedAt=iso_ms(run.finished_ms) if run.finished_ms else None,
        firstTokenAt=iso_ms(run.first_token_ms) if run.first_token_ms else None,
        previousRunId=run.previous_run_id,
        pendingToolCalls=run.pending_tool_calls,
        error=run.error if run.status in ("failed", "cancelled") else None,
        onDisconnect=run.on_disconnect,
        model=run.model,
        cancelRequested=True if run.cancel_requested_ms is not None
        and run.status in ACTIVE_RUN_STATUSES else None,
        usage=usage_model(usage or []),
        metadata=run_metadata(run),
    )


def run_metadata(run: RunRow) -> dict[str, Any] | None:
    """The client's metadata of the run (an AG-UI run keeps its input's own under `agui`,
    which is the gateway's record of the request, not metadata the client gave)."""
    metadata = dict(RunSpec.from_row(run.request).metadata or {})
    metadata.pop("agui", None)
    return metadata or None
