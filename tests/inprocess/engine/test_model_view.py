"""The model's view of a turn is built once (`engine/model_view.py`): a turn read back from the
thread's history gives the model exactly the messages the live loop gave it for that turn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.backends.database import database_backend
from gateway.engine.deltas import (
    Finish,
    ReasoningDelta,
    ReasoningSignature,
    RedactedReasoning,
    TextDelta,
    ToolCallDelta,
)
from gateway.engine.history import to_model_messages
from gateway.engine.loop import ServerToolSpec
from gateway.engine.model_view import turn_messages
from gateway.runs.execution import LoopSetup
from gateway.runs.manager import RunManager
from gateway.store.repository import Store
from tests.inprocess.conftest import (
    FAST,
    UNLIMITED,
    ScriptedDeltas,
    events,
    new_thread,
    text_turn,
    user,
)

CARD = {"name": "Card", "description": "", "propsSchema": {"type": "object"}}


async def lookup(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"found": arguments.get("q")}


@pytest.fixture
async def manager(store: Store, model: ScriptedDeltas) -> AsyncIterator[RunManager]:
    """A run manager whose loop has one server tool (`lookup`)."""
    tools = {"lookup": ServerToolSpec("lookup", "Look up.", {"type": "object"}, lookup)}
    manager = RunManager(store, LoopSetup(model, None, tools), database_backend(store, FAST),
                         UNLIMITED, FAST)
    yield manager
    await manager.shutdown()


async def test_a_turn_read_back_from_history_is_what_the_live_loop_gave_the_model(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    # One turn with text, a server tool call and a component, then the answer.
    model.enqueue([TextDelta("Let me see. "), ToolCallDelta(0, "call_s", "lookup", '{"q": "x"}'),
                   ToolCallDelta(1, "call_c", "show_component_Card", '{"title": "A"}'),
                   Finish("tool_calls")],
                  text_turn("Found it."))
    thread = await new_thread(store)
    run = (await manager.start(thread, user("find x", availableComponents=[CARD]))).run
    await events(manager, run.id)

    live = model.requests[1].messages  # the live loop's view, sent to the second model call
    components = await store.components_of(thread.id)
    stored = to_model_messages(await store.history(thread.id),
                               {cid: c.state for cid, c in components.items()})
    assert [m["role"] for m in live] == ["user", "assistant", "tool", "tool"]
    assert [m.get("tool_call_id") for m in live[2:]] == ["call_s", "call_c"]
    assert live[2]["content"] == '{"found": "x"}'
    assert live[3]["content"].startswith("Rendered component Card (id comp_")
    assert stored[:len(live)] == live
    assert stored[len(live):] == [{"role": "assistant", "content": "Found it."}]


def test_the_results_follow_the_calls_in_their_order_whatever_the_values_order() -> None:
    values = [
        {"type": "tool_result", "messageId": "m", "toolCallId": "b", "name": "t",
         "status": "success", "output": 2},
        {"type": "tool_call", "messageId": "m", "toolCallId": "a", "name": "t", "arguments": {}},
        {"type": "tool_call", "messageId": "m", "toolCallId": "b", "name": "t", "arguments": {}},
        {"type": "tool_result", "messageId": "m", "toolCallId": "a", "name": "t",
         "status": "success", "output": 1},
    ]
    messages = turn_messages(values)
    assert [m.get("tool_call_id") for m in messages] == [None, "a", "b"]
    assert messages[0]["content"] == ""  # a string: servers refuse null


async def test_signed_reasoning_goes_back_before_the_calls_live_and_from_history(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    """Anthropic requires a turn's thinking blocks, with their signatures, back before its
    tool calls when thinking is on: the live loop and the history both give them."""
    model.enqueue([ReasoningDelta("I should look. "), ReasoningSignature("sig-1"),
                   RedactedReasoning("opaque=="), ToolCallDelta(0, "call_s", "lookup", "{}"),
                   Finish("tool_calls")],
                  [ReasoningDelta("Unsigned, "), ReasoningDelta("not sent back."),
                   TextDelta("Found it."), Finish("stop")])
    thread = await new_thread(store)
    run = (await manager.start(thread, user("find x"))).run
    await events(manager, run.id)

    live = model.requests[1].messages
    stored = to_model_messages(await store.history(thread.id))
    assert live[1]["thinking_blocks"] == [
        {"type": "thinking", "thinking": "I should look. ", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "opaque=="}]
    assert stored[:len(live)] == live
    assert stored[len(live):] == [{"role": "assistant", "content": "Found it."}]
