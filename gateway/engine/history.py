"""Thread history (stored Timbal message values) -> the model's chat messages.

The model sees the whole thread on every run. Each stored Tambo message is a list of Timbal
values; a model turn becomes what the live loop gave the model for it (`model_view`: one
assistant message, text plus tool calls, followed by the results the gateway knows of). A tool
call left without a result (a cancelled or failed run) gets a synthetic one, because providers
reject a history in which an assistant tool call is not answered.

The roles alternate (`alternating`): a run that failed or was cancelled before its model said
anything leaves its user message without an answer, and the next run's user message would follow
it; strict chat templates (Gemma's) refuse such a thread for good. Two user messages in a row are
sent as one, as are two answers in a row (a continued answer, `GATEWAY_ON_TRUNCATION=continue`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ..protocol.timbal import tool_result_text
from .attachments import content_parts, has_attachment
from .model_view import turn_messages


class StoredMessage(Protocol):
    role: str
    parts: list[dict[str, Any]]


def to_model_messages(
    rows: Iterable[StoredMessage], component_states: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    states = component_states or {}
    messages: list[dict[str, Any]] = []
    for row in rows:
        if row.role == "user":
            messages.extend(user_messages(row.parts))
        elif row.role == "system":
            messages.extend({"role": "system", "content": p.get("content", "")} for p in row.parts)
        else:
            messages.extend(turn_messages(row.parts, states))
    return alternating(_answer_dangling_calls(messages))


def alternating(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with each run of user messages, and of assistant messages without tool
    calls before another assistant message, merged into one (their content joined)."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        last = merged[-1] if merged else None
        role = message["role"]
        if last is not None and role == last["role"] and role in ("user", "assistant") \
                and not last.get("tool_calls"):
            merged[-1] = _joined(last, message)
        else:
            merged.append(message)
    return merged


def _joined(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """One message of two of the same role: texts joined (a blank line between a user's),
    content parts concatenated, the second's tool calls kept."""
    a, b = first.get("content") or "", second.get("content") or ""
    if isinstance(a, str) and isinstance(b, str):
        content: Any = a + ("\n\n" if first["role"] == "user" and a and b else "") + b
    else:
        content = _parts(a) + _parts(b)
    joined = {**first, **second, "content": content}
    return joined


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, list):
        return list(content)
    return [{"type": "text", "text": content}] if content else []


def user_messages(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        if part.get("type") == "tool_result":
            out.append({"role": "tool", "tool_call_id": part["toolCallId"],
                        "content": tool_result_text(part)})
        elif part.get("type") == "user":
            text = part.get("content", "")
            context = part.get("context")
            blocks = part.get("blocks") or []
            if has_attachment(blocks):
                content = content_parts(blocks)
                if context:
                    content.append({"type": "text",
                                    "text": f"Additional context: {json.dumps(context)}"})
                out.append({"role": "user", "content": content})
                continue
            if context:
                text = f"{text}\n\nAdditional context: {json.dumps(context)}"
            out.append({"role": "user", "content": text or "(empty message)"})
        elif part.get("type") == "x-context":
            out.append({"role": "user",
                        "content": f"Additional context: {json.dumps(part['context'])}"})
    return out


def _answer_dangling_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give every tool call a result, and drop results whose call is not in the history."""
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    called: set[str] = set()
    fixed: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] == "tool" and message["tool_call_id"] not in called:
            continue
        fixed.append(message)
        for call in message.get("tool_calls", []) if message["role"] == "assistant" else []:
            called.add(call["id"])
            if call["id"] not in answered:
                fixed.append({"role": "tool", "tool_call_id": call["id"],
                              "content": "No result: the run ended before this call finished."})
    return fixed
