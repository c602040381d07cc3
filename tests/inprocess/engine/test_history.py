"""Thread history as the model sees it, built from what runs stored: a cancelled run's tool call
gets a synthetic answer (providers refuse unanswered calls), a component's current state is
shown, and a client tool result follows its call."""

from __future__ import annotations

import asyncio

from gateway.engine.history import to_model_messages
from gateway.runs.manager import RunManager
from gateway.store.repository import Store
from tests.inprocess.conftest import (
    ScriptedDeltas,
    events,
    new_thread,
    text_turn,
    tool_results,
    tool_turn,
    user,
)

TOOL = {"name": "get_time", "description": "", "inputSchema": {"type": "object"}}
CARD = {"name": "Card", "description": "", "propsSchema": {"type": "object"}}


async def test_history_answers_every_call_and_shows_component_state(
        manager: RunManager, store: Store, model: ScriptedDeltas) -> None:
    thread = await new_thread(store)
    # 1: a client tool call, answered by the next run.
    model.enqueue(tool_turn("call_t", "get_time", "{}"), text_turn("Noon."))
    first = (await manager.start(thread, user("time?", tools=[TOOL]))).run
    await events(manager, first.id)
    second = (await manager.start(thread, tool_results(
        {"call_t": "12:00"}, previousRunId=first.id, tools=[TOOL]))).run
    await events(manager, second.id)
    # 2: a component, whose state a client then changes.
    model.enqueue(tool_turn("call_c", "show_component_Card", '{"title": "A"}'))
    third = (await manager.start(thread, user("card", previousRunId=second.id,
                                                       availableComponents=[CARD]))).run
    await events(manager, third.id)
    [card] = await store.components_of(thread.id)
    await manager.components.update(thread.id, card, state={"open": True})
    # 3: a tool call cut short by a cancel.
    hold = asyncio.Event()
    model.enqueue([*tool_turn("call_x", "get_time", "{}")[:-1], hold])
    fourth = (await manager.start(thread, user("again", previousRunId=third.id,
                                                        tools=[TOOL]))).run
    while not manager.live_log(fourth.id) or manager.live_log(fourth.id).last < 4:
        await asyncio.sleep(0.005)
    await manager.cancel(fourth.id)

    components = await store.components_of(thread.id)
    messages = to_model_messages(await store.history(thread.id),
                                 {cid: c.state for cid, c in components.items()})
    roles = [(m["role"], m.get("tool_call_id") or m.get("content")) for m in messages]
    assert roles[:4] == [("user", "time?"), ("assistant", ""), ("tool", "call_t"),
                         ("assistant", "Noon.")]
    assert messages[2]["content"] == "12:00"
    shown = next(m for m in messages if m.get("tool_call_id") == "call_c")
    assert shown["content"].endswith('Its current state: {"open": true}')
    dangling = next(m for m in messages if m.get("tool_call_id") == "call_x")
    assert "run ended before this call finished" in dangling["content"]
    called = {c["id"] for m in messages for c in m.get("tool_calls", [])}
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    assert called == answered
