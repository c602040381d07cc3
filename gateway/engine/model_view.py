"""The model's view of one turn: the Timbal values of an assistant message -> chat messages.

Built here and only here, for both paths that need it: the live loop (`engine/loop.py`), which
appends a turn it just streamed to the messages of its next model call, and the history
(`engine/history.py`), which reads stored turns back for the thread's next run. Both give the
model exactly the same messages for the same turn (`tests/inprocess/engine/test_model_view.py`).

A turn is one assistant message (its text, and its tool calls, components being tool calls
too, named `show_component_<Name>`) followed by one result per call, in the calls' order: a
server tool's result, or a note that a component was rendered (with its state, when it has
one). A client tool's result arrives with the next run's input, as a user message.

Reasoning the provider signed (Anthropic's thinking, with its signature, and its redacted
blocks) goes back as the message's `thinking_blocks`, litellm's name for them: Anthropic
requires them before the tool calls of a turn that thought, and litellm's translation puts
them there. Unsigned reasoning (an OpenAI-compatible server's) is the model's own scratch and
is not sent back. An OpenAI-compatible upstream is never sent `thinking_blocks`
(`reasoning.replayable`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..protocol.timbal import tool_result_text

# The tool name under which the model is offered (and calls) a component.
COMPONENT_TOOL_PREFIX = "show_component_"

ChatMessage = dict[str, Any]


def turn_messages(values: Sequence[Mapping[str, Any]],
                  component_states: Mapping[str, Any] | None = None) -> list[ChatMessage]:
    """The chat messages of one turn's values (`agent`, `thinking`, `tool_call`, `x-component`,
    `tool_result`, in any order); `component_states` holds states newer than the values'."""
    states = component_states or {}
    text: list[str] = []
    calls: list[ChatMessage] = []
    thinking: list[ChatMessage] = []
    results: dict[str, ChatMessage] = {}  # by tool call id
    for value in values:
        kind = value.get("type")
        if kind == "agent":
            text.append(value.get("content", ""))
        elif kind == "thinking" and (value.get("signature") or value.get("redacted")):
            thinking.append(_thinking_block(value))
        elif kind == "tool_call":
            calls.append(_call(value["toolCallId"], value["name"], value.get("arguments") or {}))
        elif kind == "x-component":
            call_id = value.get("toolCallId") or value["componentId"]
            calls.append(_call(call_id, COMPONENT_TOOL_PREFIX + value["name"],
                               value.get("props") or {}))
            results[call_id] = _tool_message(call_id, _component_note(value, states))
        elif kind == "tool_result":
            results[value["toolCallId"]] = _tool_message(value["toolCallId"],
                                                         tool_result_text(value))
    ordered = [results.pop(call["id"]) for call in calls if call["id"] in results]
    rest = list(results.values())  # results of calls not in this turn (dropped later)
    # `content` is a string even beside tool calls: OpenAI takes null there, but llama.cpp's
    # server refuses it (500) and strict chat templates fail on it.
    message: ChatMessage = {"role": "assistant", "content": "".join(text)}
    if calls:
        message["tool_calls"] = calls
    elif not message["content"]:
        return rest
    if thinking:
        message["thinking_blocks"] = thinking
    return [message, *ordered, *rest]


def _thinking_block(value: Mapping[str, Any]) -> ChatMessage:
    if value.get("redacted"):
        return {"type": "redacted_thinking", "data": value["redacted"]}
    return {"type": "thinking", "thinking": value.get("content", ""),
            "signature": value["signature"]}


def _component_note(value: Mapping[str, Any], states: Mapping[str, Any]) -> str:
    state = states.get(value["componentId"], value.get("state"))
    note = f"Rendered component {value['name']} (id {value['componentId']})."
    if state is not None:
        note += f" Its current state: {json.dumps(state)}"
    return note


def _call(call_id: str, name: str, arguments: Any) -> ChatMessage:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}


def _tool_message(call_id: str, content: str) -> ChatMessage:
    return {"role": "tool", "tool_call_id": call_id, "content": content}
