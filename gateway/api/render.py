"""Stored rows -> the Tambo REST shapes the clients read."""

from __future__ import annotations

from typing import Any, Mapping

from ..protocol.clock import iso_ms
from ..protocol.timbal import tool_result_text
from ..store.tables import ComponentRow, MessageRow, ThreadRow


def page_json(name: str, items: list[dict[str, Any]], page: Any) -> dict[str, Any]:
    """The list envelope every listing shares: `{<name>: [...], hasMore, nextCursor?}`."""
    body: dict[str, Any] = {name: items, "hasMore": page.has_more}
    if page.next_cursor:
        body["nextCursor"] = page.next_cursor
    return body


def thread_json(row: ThreadRow) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": row.id,
        "createdAt": iso_ms(row.created_ms),
        "updatedAt": iso_ms(row.updated_ms),
        "runStatus": row.run_status,
        "name": row.name,
        "metadata": row.meta,
        "userKey": row.user_key,
        "currentRunId": row.current_run_id,
        "lastCompletedRunId": row.last_completed_run_id,
        "lastRunCancelled": row.last_run_cancelled,
        "lastRunError": row.last_run_error,
        "pendingToolCallIds": [p["toolCallId"] for p in row.pending_tool_calls or []],
    }
    return {k: v for k, v in body.items() if v is not None}


def message_json(row: MessageRow, components: Mapping[str, ComponentRow] | None = None
                 ) -> dict[str, Any]:
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
    role = row.role
    if role == "user" and blocks and all(b["type"] == "tool_result" for b in blocks):
        role = "assistant"  # as the real server reads back client tool results
    body: dict[str, Any] = {
        "id": row.id,
        "role": role,
        "content": blocks,
        "createdAt": iso_ms(row.created_ms),
        "runId": row.run_id,
    }
    if reasoning:
        body["reasoning"] = reasoning
    if row.is_cancelled:
        body["isCancelled"] = True
    if row.meta:
        body["metadata"] = row.meta
    return body
